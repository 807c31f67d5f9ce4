"""Group commit: write transactions queued together on the writing connection share one
COMMIT, each in a savepoint of its own; a write that raises is undone alone, and a lost
transaction or a failed COMMIT fails every write of the group, none of them applied (no
write is acknowledged before the COMMIT)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from typing import TYPE_CHECKING, Any

import pytest

from mcp_tasks import DuplicateTaskId, NewTask, StoreOptions, new_task_id
from mcp_tasks_sqlite import store as store_module
from mcp_tasks_sqlite.thread import ConnectionThread

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from conftest import OpenStore

    from mcp_tasks_sqlite.store_time import StoreTime

pytestmark = pytest.mark.anyio


def rows(db_path: Path) -> list[int]:
    with sqlite3.connect(db_path) as conn:
        return [row[0] for row in conn.execute("SELECT n FROM t ORDER BY n")]


@pytest.fixture
def blocked_thread(db_path: Path) -> Iterator[tuple[ConnectionThread, threading.Event]]:
    """A connection thread on a file with a table ``t(n)``, and an event: a call that waits
    for it keeps the thread busy while the test queues the writes that follow."""

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(db_path, isolation_level=None)
        conn.execute("CREATE TABLE IF NOT EXISTS t (n INTEGER)")
        return conn

    release = threading.Event()
    yield ConnectionThread(connect, name="test"), release
    release.set()


def insert(n: int) -> Callable[[sqlite3.Connection], int]:
    return lambda conn: conn.execute("INSERT INTO t VALUES (?)", (n,)).rowcount


async def queued_behind_a_busy_thread(
    thread: ConnectionThread,
    release: threading.Event,
    works: list[Callable[..., Any]],
    *,
    stop: bool = True,
) -> list[Any]:
    """Each of ``works`` as a write transaction, all queued while the thread is busy (so
    they run as one group); their outcomes, exceptions included. The thread is stopped
    afterwards unless ``stop`` is false."""
    busy = asyncio.ensure_future(thread.run(lambda conn: release.wait(30)))
    await asyncio.sleep(0)  # the blocking call is queued first
    writes = [asyncio.ensure_future(thread.transact(work)) for work in works]
    for _ in range(3):  # every write reaches the queue (no I/O on the way)
        await asyncio.sleep(0)
    release.set()
    await busy
    outcomes = await asyncio.gather(*writes, return_exceptions=True)
    if stop:
        await thread.stop()
    return outcomes


async def test_a_write_that_raises_in_a_group_is_undone_alone(
    blocked_thread: tuple[ConnectionThread, threading.Event], db_path: Path
) -> None:
    """The others commit; the one that raised leaves nothing (its savepoint rolled back)."""

    def insert_then_fail(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t VALUES (2)")
        raise ValueError("the body's own error")

    outcomes = await queued_behind_a_busy_thread(
        *blocked_thread, [insert(1), insert_then_fail, insert(3)]
    )
    assert outcomes[0] == 1
    assert isinstance(outcomes[1], ValueError)
    assert outcomes[2] == 1
    assert rows(db_path) == [1, 3]


async def test_a_lost_transaction_fails_every_write_of_its_group(
    blocked_thread: tuple[ConnectionThread, threading.Event], db_path: Path
) -> None:
    """When SQLite ends the whole transaction (as it does on some I/O errors), the writes
    that had already run are not applied either, and each hears the error."""

    def end_everything(conn: sqlite3.Connection) -> None:
        conn.execute("ROLLBACK")  # what SQLite does itself on, e.g., SQLITE_FULL
        raise sqlite3.OperationalError("database or disk is full")

    outcomes = await queued_behind_a_busy_thread(
        *blocked_thread, [insert(1), end_everything, insert(3)]
    )
    assert all(isinstance(o, sqlite3.OperationalError) for o in outcomes), outcomes
    assert rows(db_path) == []


async def test_a_failed_commit_fails_every_write_of_its_group(db_path: Path) -> None:
    """Every write of a group hears its outcome only after the COMMIT: when the COMMIT
    itself fails (here a deferred constraint, which SQLite checks only then), no write of
    the group is acknowledged, each hears the COMMIT's error, and none is applied. The
    failed transaction is rolled back: the connection's next write commits."""

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(db_path, isolation_level=None)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("CREATE TABLE IF NOT EXISTS parent (n INTEGER PRIMARY KEY)")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS t (n INTEGER REFERENCES parent (n)"
            " DEFERRABLE INITIALLY DEFERRED)"
        )
        return conn

    def insert_an_orphan(conn: sqlite3.Connection) -> int:
        return conn.execute("INSERT INTO t VALUES (99)").rowcount  # no parent 99

    thread, release = ConnectionThread(connect, name="test"), threading.Event()
    try:
        await thread.run(lambda conn: conn.execute("INSERT INTO parent VALUES (1), (3)"))
        outcomes = await queued_behind_a_busy_thread(
            thread, release, [insert(1), insert_an_orphan, insert(3)], stop=False
        )
        assert all(isinstance(o, sqlite3.IntegrityError) for o in outcomes), outcomes
        assert rows(db_path) == []
        assert await thread.transact(insert(3)) == 1
        assert rows(db_path) == [3]
    finally:
        release.set()
        await thread.stop()


async def test_creates_queued_together_share_a_commit_and_a_duplicate_fails_alone(
    open_store: OpenStore, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twenty creates queued while another process holds the write lock: far fewer COMMITs
    than creates; the one with an existing id raises DuplicateTaskId and takes back its
    bump of the row counter, which still matches the rows."""
    commits: list[str] = []
    real_open = store_module._open

    def traced_open(path: Path, busy_timeout_s: float, store_time: StoreTime) -> sqlite3.Connection:
        conn = real_open(path, busy_timeout_s, store_time)
        conn.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
        return conn

    monkeypatch.setattr(store_module, "_open", traced_open)
    store = await open_store(StoreOptions(max_rows=10_000))
    existing = await store.create(NewTask(new_task_id()))
    commits.clear()
    holder = sqlite3.connect(db_path, timeout=0, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # as another process would
        news = [NewTask(new_task_id()) for _ in range(20)]
        news.insert(10, NewTask(existing.task_id))
        writes = [asyncio.ensure_future(store.create(task)) for task in news]
        for _ in range(5):  # every create reaches the writing thread's queue
            await asyncio.sleep(0)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    outcomes = await asyncio.gather(*writes, return_exceptions=True)
    assert [type(o) for o in outcomes].count(DuplicateTaskId) == 1
    assert isinstance(outcomes[10], DuplicateTaskId)
    assert sum(1 for o in outcomes if not isinstance(o, BaseException)) == 20
    assert 1 <= len(commits) <= 3, commits  # one per create before
    with sqlite3.connect(db_path) as conn:
        (counted,) = conn.execute("SELECT n_rows FROM task_rows").fetchone()
        (actual,) = conn.execute("SELECT count(*) FROM tasks").fetchone()
    assert counted == actual == 21
