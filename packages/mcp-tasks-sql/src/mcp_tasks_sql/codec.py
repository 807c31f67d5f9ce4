"""A TaskRecord as one table row and back: selection columns plus one JSON text payload.

The shape is the core's (:mod:`mcp_tasks.stores.codec`), shared with the other persistent
stores; a row keeps the payload as JSON text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_tasks.domain.jsonsafe import dumps, loads
from mcp_tasks.stores.codec import columns_of, payload_of, record_from

if TYPE_CHECKING:
    from mcp_tasks.domain.models import TaskRecord
    from mcp_tasks_sql.connection import Row

__all__ = ["RowDecoder", "from_row", "to_row"]


def to_row(record: TaskRecord) -> dict[str, Any]:
    """The column values of ``record`` (without ``row_version``, which the store manages)."""
    return {**columns_of(record), "payload": dumps(payload_of(record))}


def from_row(row: Row) -> TaskRecord:
    """The record a row holds (any mapping of column name to value: a driver's row)."""
    return record_from(row, loads(row["payload"]))


class RowDecoder:
    """:func:`from_row` for rows of the read statement (``now_ms``, then every column of
    the task table) that remembers the rows it decoded last.

    A record is a pure function of its row's values and is immutable, so a row read again
    unchanged (a task polled while nothing happens to it, the hot path of ``tasks/get``)
    gets the record decoded the first time instead of parsing the JSON payload and
    building the record again. The key is every task column's value, so a changed row
    never matches; the memory holds the ``size`` most recently decoded rows whose payload
    is at most ``max_payload`` characters (a large result is decoded each time rather than
    held: ``size`` of them could be any amount of memory).
    """

    def __init__(self, size: int = 1024, max_payload: int = 16_384) -> None:
        self._size = size
        self._max_payload = max_payload
        self._records: dict[tuple[Any, ...], TaskRecord] = {}

    def __call__(self, row: Row) -> TaskRecord:
        key = tuple(row)[1:]  # by position: naming 11 columns costs more than the rest

        record = self._records.get(key)
        if record is None:
            record = from_row(row)
            if len(row["payload"]) > self._max_payload:
                return record
            if len(self._records) >= self._size:
                del self._records[next(iter(self._records))]  # the oldest
            self._records[key] = record
        return record
