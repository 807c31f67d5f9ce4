"""What the SQLite store makes of its file: WAL journal mode, and indexes for the hot paths."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import TYPE_CHECKING

import anyio
import pytest

from mcp_tasks import ANY_OWNER, NewTask, Progress, TaskStatus, WorkSpec, new_task_id

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


@pytest.mark.parametrize("operation", ["get", "claim", "claim_of_a_type", "claim_of_types", "reap"])
async def test_hot_paths_use_indexes(open_store: OpenStore, db_path: Path, operation: str) -> None:
    """SQLite's planner serves get, claim and reap from indexes, never a full table scan."""
    store = await open_store()
    await store.migrate()
    sql = store.dialect.statements
    statement, values = {
        "get": (sql.read, {"task_id": "x", "now": 0}),
        "claim": (sql.claim_next, {"now": 0}),
        "claim_of_a_type": (sql.claim_next_of(1), {"now": 0, "work_type_0": "a"}),
        "claim_of_types": (
            sql.claim_next_of(2),
            {"now": 0, "work_type_0": "a", "work_type_1": "b"},
        ),
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


async def test_a_read_does_not_wait_for_a_write_still_waiting_for_the_lock(
    open_store: OpenStore, db_path: Path
) -> None:
    """Reads have a connection of their own: while a write waits for the file's write lock
    (another process holds it), a ``get`` answers, with what was committed before."""
    store = await open_store()
    task = await store.create(NewTask(new_task_id()))
    await store.get(task.task_id, ANY_OWNER)  # both connections open
    holder = sqlite3.connect(db_path, timeout=0, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # free now: taken at once
        write = asyncio.ensure_future(store.put_status(task.task_id, Progress("after")))
        for _ in range(5):  # the write runs up to its thread's queue (no I/O on the way)
            await asyncio.sleep(0)
        with anyio.fail_after(10):  # far beyond a read; the write waits up to 30 s
            read = await store.get(task.task_id, ANY_OWNER)
        assert not write.done()
        assert read.status_message is None
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert (await write).record.status_message == "after"


async def test_migrate_adds_the_work_type_to_an_older_table(
    open_store: OpenStore, db_path: Path
) -> None:
    """A table from before the ``work_type`` column (S-CLAIM.4): the first use of the file
    adds the column and its index and fills it from the payload, so claims for the type
    find the tasks written before."""
    old = await open_store()
    alpha = await old.create(NewTask(new_task_id(), work=WorkSpec("alpha")))
    beta = await old.create(NewTask(new_task_id(), work=WorkSpec("beta")))
    await old.close()
    with sqlite3.connect(db_path) as conn:
        conn.execute("DROP INDEX tasks_claim_type_ix")
        conn.execute("ALTER TABLE tasks DROP COLUMN work_type")
    store = await open_store()
    claimed = await store.claim("w", lease_ms=30_000, work_types=frozenset({"beta"}))
    assert claimed is not None
    assert claimed.record.task_id == beta.task_id
    claimed = await store.claim("w", lease_ms=30_000, work_types=frozenset({"alpha"}))
    assert claimed is not None
    assert claimed.record.task_id == alpha.task_id


async def test_migrate_counts_the_tasks_of_an_older_file(
    open_store: OpenStore, db_path: Path
) -> None:
    """A file from before the counters: the first use makes the counters from the
    tasks there, in the migration's transaction, and the triggers that keep them, so
    ``counts()`` is exact at once and stays so through a cancel and a reap."""
    old = await open_store()
    tasks = [await old.create(NewTask(new_task_id(), ttl_ms=3_600_000)) for _ in range(5)]
    await old.cancel(tasks[0].task_id, ANY_OWNER)
    await old.create(NewTask(new_task_id(), ttl_ms=1))  # expired: a row, in no status
    await old.close()
    with sqlite3.connect(db_path) as conn:
        for table in ("task_status_counts", "task_owner_counts", "task_expiry_counts"):
            conn.execute(f"DROP TABLE {table}")
        for event in ("insert", "update", "expiry", "delete"):
            conn.execute(f"DROP TRIGGER tasks_count_{event}")
    store = await open_store()
    await store.get(tasks[1].task_id, ANY_OWNER)  # the first use migrates
    counts = await store.counts()
    assert (counts.rows, counts.by_status[TaskStatus.WORKING]) == (6, 4)
    await store.cancel(tasks[1].task_id, ANY_OWNER)
    await anyio.sleep(0.01)
    assert await store.reap() == 1
    counts, stats = await store.counts(), await store.stats()
    assert (counts.rows, dict(counts.by_status)) == (stats.rows, dict(stats.by_status))
    assert (counts.rows, counts.by_status[TaskStatus.CANCELLED]) == (5, 2)
