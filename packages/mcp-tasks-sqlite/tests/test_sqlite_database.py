"""What the SQLite store makes of its file: WAL journal mode, and indexes for the hot paths."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import anyio
import pytest

if TYPE_CHECKING:
    from pathlib import Path

    from conftest import OpenStore

pytestmark = pytest.mark.anyio


async def test_database_runs_in_wal_mode(open_store: OpenStore, db_path: Path) -> None:
    """The file is in WAL mode, so readers never wait for the writer."""
    await (await open_store()).migrate()
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_switch_to_wal_waits_for_another_writer(open_store: OpenStore, db_path: Path) -> None:
    """A first open while another connection writes a file still in rollback mode waits for
    it: the switch to WAL upgrades a read lock, which SQLite refuses with SQLITE_BUSY at once
    (never calling the busy handler), so the store retries it within its busy timeout."""
    writer = sqlite3.connect(db_path, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")  # the write lock of a new, rollback-mode file
        store = await open_store(busy_timeout_s=10.0)
        async with anyio.create_task_group() as group:
            group.start_soon(store.migrate)
            await anyio.sleep(0.3)
            writer.rollback()
    finally:
        writer.close()
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.parametrize("operation", ["get", "claim", "reap"])
async def test_hot_paths_use_indexes(open_store: OpenStore, db_path: Path, operation: str) -> None:
    """SQLite's planner serves get, claim and reap from indexes, never a full table scan."""
    store = await open_store()
    await store.migrate()
    sql = store.dialect.statements
    statement, values = {
        "get": (sql.read, {"task_id": "x", "now": 0}),
        "claim": (sql.claim_next, {"now": 0}),
        "reap": (sql.reap, {"now": 0, "retention": 1, "limit": 500}),
    }[operation]
    with sqlite3.connect(db_path) as conn:
        plan = conn.execute(
            "EXPLAIN QUERY PLAN " + statement.text, statement.args(values)
        ).fetchall()
    details = [row[-1] for row in plan]
    full_scans = [d for d in details if d.startswith("SCAN tasks") and "INDEX" not in d]
    assert not full_scans, details
    assert any("INDEX" in d for d in details), details
