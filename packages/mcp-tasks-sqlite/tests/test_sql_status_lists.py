"""The SQL layer's status lists come from the status machine, and their SQL text is fixed.

The partial indexes of existing databases were created with this exact text
(``CREATE INDEX IF NOT EXISTS`` never rewrites them), and a query can use a partial index
only when its predicate matches; so deriving the lists from the table must not change a
single character of the SQL.
"""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from mcp_tasks.domain.states import LIVE, TERMINAL, Event, statuses_allowing
from mcp_tasks_sql.schema import ACTIVE, CLAIMABLE, TERMINAL_STATUSES, task_tables
from mcp_tasks_sql.statements import build, ddl

LIVE_SQL = "status IN ('working', 'input_required')"
TERMINAL_SQL = "status IN ('cancelled', 'completed', 'failed')"


def test_the_lists_are_read_from_the_status_machine() -> None:
    """ACTIVE is the live statuses, CLAIMABLE those a claim is legal in, TERMINAL_STATUSES
    the terminal ones (sorted)."""
    assert ACTIVE == LIVE
    assert statuses_allowing(Event.CLAIM) == CLAIMABLE
    assert set(TERMINAL_STATUSES) == TERMINAL
    assert list(TERMINAL_STATUSES) == sorted(TERMINAL_STATUSES)


@pytest.mark.parametrize(
    "dialect", [sqlite.dialect(), postgresql.dialect()], ids=lambda dialect: dialect.name
)
def test_every_status_list_in_the_sql_is_spelled_as_before(dialect: sa.Dialect) -> None:
    """Every ``status IN (…)`` in the DDL and the statements is one of two exact texts."""
    tables = task_tables()
    statements = build(tables, dialect, sa.bindparam("now", type_=sa.BigInteger))
    fields = [getattr(statements, f) for f in statements.__slots__]
    # A statement built per count of parameters (a claim by 1 or more work types): its forms.
    compiled = [
        form for field in fields for form in ((field(1), field(2)) if callable(field) else (field,))
    ]
    texts = [*ddl(tables, dialect), *(sql.text for sql in compiled if sql is not None)]
    found = {m for text in texts for m in re.findall(r"status IN \([^)]*\)", text)}
    assert found == {LIVE_SQL, TERMINAL_SQL}
