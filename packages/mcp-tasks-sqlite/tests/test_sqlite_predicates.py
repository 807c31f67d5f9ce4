"""The SQL predicates (claimable, reapable, under the caps) select on SQLite exactly what
the rules they re-state accept (mcp_tasks_sql.testing.check_predicates, on a real file)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects.sqlite.aiosqlite import SQLiteDialect_aiosqlite

from mcp_tasks_sql import predicates, task_tables
from mcp_tasks_sql import testing as sql_testing
from mcp_tasks_sql.schema import ACTIVE, status_in
from mcp_tasks_sqlite.store import SQLiteDialect

if TYPE_CHECKING:
    from pathlib import Path

    from mcp_tasks_sql import Predicates, TaskTables

pytestmark = pytest.mark.anyio

PREFIX = "pred_"


async def check(path: Path) -> None:
    dialect = SQLiteDialect(path, table_prefix=PREFIX)
    try:
        await sql_testing.check_predicates(
            dialect, task_tables(prefix=PREFIX), SQLiteDialect_aiosqlite()
        )
    finally:
        await dialect.close()


async def test_sql_predicates_agree_with_the_rules(tmp_path: Path) -> None:
    """Every predicate selects exactly the generated records its rule accepts, at the same now."""
    await check(tmp_path / "predicates.db")


async def test_a_predicate_off_by_one_millisecond_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check is not vacuous: a claim candidate that counts a task expiring exactly now
    as unexpired (``>=`` for ``>``) fails it."""

    def off_by_one(tables: TaskTables, now: sa.ColumnElement[int]) -> Predicates:
        c = tables.tasks.c
        claimable = sa.and_(
            status_in(c.status, ACTIVE),
            c.has_work,
            sa.or_(c.retry_at.is_(None), c.retry_at <= now),
            sa.or_(c.expires_at.is_(None), c.expires_at >= now),  # the bug: `>` is right
            sa.or_(c.claim_expires_at.is_(None), c.claim_expires_at <= now),
        )
        return replace(predicates(tables, now), claimable=claimable)

    monkeypatch.setattr(sql_testing, "predicates", off_by_one)
    with pytest.raises(AssertionError, match=r"Predicates\.claimable wrongly selected"):
        await check(tmp_path / "predicates.db")
