"""A TaskRecord as one table row and back: selection columns plus one JSON text payload.

The shape is the core's (:mod:`mcp_tasks.stores.codec`), shared with the other persistent
stores; a row keeps the payload as JSON text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_tasks.domain.jsonsafe import dumps, loads
from mcp_tasks.stores.codec import asked_inputs, columns_of, payload_of, record_from

if TYPE_CHECKING:
    from mcp_tasks.domain.models import TaskRecord
    from mcp_tasks_sql.connection import Row

__all__ = ["asked_inputs", "from_row", "to_row"]


def to_row(record: TaskRecord) -> dict[str, Any]:
    """The column values of ``record`` (without ``row_version``, which the store manages)."""
    return {**columns_of(record), "payload": dumps(payload_of(record))}


def from_row(row: Row) -> TaskRecord:
    """The record a row holds (any mapping of column name to value: a driver's row)."""
    return record_from(row, loads(row["payload"]))
