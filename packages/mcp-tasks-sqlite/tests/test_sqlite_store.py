"""The SQLite store on a real file: URLs, WAL, the injectable clock, races across
connections and processes, errors, index plans."""

from __future__ import annotations

import sqlite3
import sys
import textwrap
from typing import TYPE_CHECKING

import anyio
import pytest

from mcp_tasks import (
    ANY_OWNER,
    ManualClock,
    NewTask,
    Retry,
    StaleLease,
    StoreOptions,
    StoreUnavailable,
    TaskLimitReached,
    TaskNotFound,
    WorkSpec,
    new_task_id,
    store_from_url,
)
from mcp_tasks_sqlite import SQLiteTaskStore

if TYPE_CHECKING:
    from pathlib import Path

    from conftest import OpenStore

pytestmark = pytest.mark.anyio


async def test_store_from_url_opens_a_file(tmp_path: Path) -> None:
    """sqlite:////absolute/path resolves through the entry point to that file."""
    path = tmp_path / "via-url.db"
    store = store_from_url(f"sqlite:///{path}")
    assert isinstance(store, SQLiteTaskStore)
    assert store.path == path
    try:
        await store.create(NewTask(new_task_id()))
    finally:
        await store.close()
    assert path.exists()


def test_memory_databases_are_refused() -> None:
    """A store needs a real file: ':memory:' is not shared between connections."""
    with pytest.raises(ValueError, match="memory://"):
        SQLiteTaskStore(":memory:")


def test_repr_names_the_file(tmp_path: Path) -> None:
    """repr(store) says which file it uses."""
    assert "tasks.db" in repr(SQLiteTaskStore(tmp_path / "tasks.db"))


async def test_unopenable_file_is_store_unavailable(tmp_path: Path) -> None:
    """A file that cannot be opened surfaces as StoreUnavailable with the driver error as cause."""
    store = SQLiteTaskStore(tmp_path / "missing-dir" / "tasks.db")
    with pytest.raises(StoreUnavailable) as caught:
        await store.get(new_task_id(), None)
    assert caught.value.__cause__ is not None
    await store.close()


async def test_closed_store_is_unavailable(open_store: OpenStore) -> None:
    """After close(), every operation raises StoreUnavailable; close() is idempotent."""
    store = await open_store()
    await store.create(NewTask(new_task_id()))
    await store.close()
    await store.close()
    with pytest.raises(StoreUnavailable):
        await store.get(new_task_id(), None)


async def test_database_runs_in_wal_mode(open_store: OpenStore, db_path: Path) -> None:
    """The file is in WAL mode, so readers never wait for the writer."""
    await (await open_store()).migrate()
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_injected_clock_drives_ttl_leases_and_retries(open_store: OpenStore) -> None:
    """TTL expiry, lease expiry and retry delays all follow the injected clock."""
    clock = ManualClock()
    store = await open_store(clock=clock)
    task = await store.create(
        NewTask(new_task_id(), ttl_ms=10_000, work=WorkSpec("j", None, retry_delays_ms=(500,)))
    )
    first = await store.claim("w1", lease_ms=1_000)
    assert first is not None
    assert first.lease.expires_at == clock() + 1_000
    clock.advance(1_000)
    second = await store.claim("w2", lease_ms=1_000)
    assert second is not None
    with pytest.raises(StaleLease):
        await store.renew(first.lease, lease_ms=1_000)
    retried = await store.put_status(
        task.task_id, Retry({"code": 1, "message": "again"}), lease=second.lease
    )
    assert retried.record.retry_at == clock() + 500
    assert await store.claim("w3", lease_ms=1_000) is None
    clock.advance(500)
    assert await store.claim("w3", lease_ms=1_000) is not None
    clock.advance(10_000)
    with pytest.raises(TaskNotFound):
        await store.get(task.task_id, ANY_OWNER)
    assert await store.reap() == 1


async def test_creates_at_the_cap_never_exceed_it(open_store: OpenStore, db_path: Path) -> None:
    """Concurrent creates on separate connections never pass max_rows."""
    stores = [await open_store(StoreOptions(max_rows=10)) for _ in range(6)]
    results: list[str] = []

    async def create(i: int) -> None:
        try:
            await stores[i % 6].create(NewTask(new_task_id()))
            results.append("created")
        except TaskLimitReached:
            results.append("limit")

    async with anyio.create_task_group() as tg:
        for i in range(40):
            tg.start_soon(create, i)
    assert results.count("created") == 10
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM tasks").fetchone()[0] == 10


PROCESS_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from mcp_tasks import NewTask, Progress, StoreOptions, TaskLimitReached, new_task_id
    from mcp_tasks_sqlite import SQLiteTaskStore

    async def main(path, task_id, writes):
        store = SQLiteTaskStore(path, StoreOptions(max_rows=31))
        created = 0
        for i in range(writes):
            await store.put_status(task_id, Progress(str(i)))
            try:
                await store.create(NewTask(new_task_id()))
                created += 1
            except TaskLimitReached:
                pass
        await store.close()
        print(created)

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
    """
)


async def test_several_processes_share_one_file_safely(
    open_store: OpenStore, db_path: Path
) -> None:
    """4 processes writing one task and creating at the cap: no lost update, never over the cap."""
    store = await open_store(StoreOptions(max_rows=31))
    task = await store.create(NewTask(new_task_id()))
    outputs: list[str] = []

    async def run_process() -> None:
        args = [sys.executable, "-c", PROCESS_SCRIPT, str(db_path), task.task_id, "25"]
        done = await anyio.run_process(args, check=True)
        outputs.append(done.stdout.decode())

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(run_process)
    created = sum(int(out) for out in outputs)
    assert (await store.get(task.task_id, None)).revision == 100
    assert created == 30
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM tasks").fetchone()[0] == 31


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


async def test_caller_errors_are_not_store_failures(open_store: OpenStore) -> None:
    """A bad argument raises its own ValueError, not StoreUnavailable, and writes nothing."""
    store = await open_store()
    task = await store.create(NewTask(new_task_id(), work=WorkSpec("j")))
    with pytest.raises(ValueError, match="lease_ms") as caught:
        await store.claim("w", lease_ms=0)
    assert not isinstance(caught.value, StoreUnavailable)
    assert await store.get(task.task_id, None) == task
