"""`mcp-tasks doctor`'s SQLite checks (``SQLiteTaskStore.diagnose``) on a real file."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

from mcp_tasks import NewTask, StoreUnavailable, new_task_id

if TYPE_CHECKING:
    from pathlib import Path

    from conftest import OpenStore

pytestmark = pytest.mark.anyio


async def test_a_migrated_file_is_ok_and_counts_its_tasks(open_store: OpenStore) -> None:
    """After migrate: the library version, WAL with synchronous FULL, and a complete schema
    whose row counter counts the tasks created."""
    store = await open_store(table_prefix="t_")
    await store.migrate()
    await store.create(NewTask(new_task_id()))
    rows = await store.diagnose()
    assert [(name, level) for name, level, _ in rows] == [
        ("sqlite", "ok"),
        ("journal", "ok"),
        ("schema", "ok"),
    ]
    details = {name: detail for name, _, detail in rows}
    assert details["sqlite"] == f"SQLite library {sqlite3.sqlite_version}, file {store.path}"
    assert details["journal"].startswith("journal_mode wal, synchronous FULL: ")
    assert details["schema"].startswith(
        "table prefix 't_': every table and index present; the row counter says 1 task "
    )


async def test_a_missing_index_fails_the_schema_row(open_store: OpenStore, db_path: Path) -> None:
    """A schema missing one index is a failed schema row naming it and the fix."""
    store = await open_store()
    await store.migrate()
    with sqlite3.connect(db_path) as conn:
        conn.execute("DROP INDEX tasks_expires_ix")
    rows = await store.diagnose()
    assert (
        "schema",
        "fail",
        "no table prefix: missing tasks_expires_ix; run mcp-tasks migrate",
    ) in rows


async def test_a_closed_store_is_refused(open_store: OpenStore) -> None:
    """diagnose on a closed store raises StoreUnavailable, as every operation does."""
    store = await open_store()
    await store.close()
    with pytest.raises(StoreUnavailable):
        await store.diagnose()
