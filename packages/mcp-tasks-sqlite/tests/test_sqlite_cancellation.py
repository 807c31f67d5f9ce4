"""A write cancelled at any point: no transaction left open, nothing half-written, and the
store goes on working (each write runs whole on the connection's thread)."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import TYPE_CHECKING, Any

import pytest

from mcp_tasks import (
    ANY_OWNER,
    NewTask,
    Progress,
    StoreOptions,
    TaskNotFound,
    WorkSpec,
    new_task_id,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine
    from pathlib import Path

    from conftest import OpenStore

pytestmark = pytest.mark.anyio

#: How many times the event loop runs between starting a write and cancelling it: 0 is
#: before its first await, later points fall while it is queued or running on the thread.
CANCEL_POINTS = range(12)


def counted_and_actual_rows(db_path: Path) -> tuple[int, int]:
    """The row counter the caps rely on, and the rows there are (create and reap change
    both in one transaction: they differ when one of those was half-written)."""
    with sqlite3.connect(db_path) as conn:
        (counted,) = conn.execute("SELECT n_rows FROM task_rows").fetchone()
        (actual,) = conn.execute("SELECT count(*) FROM tasks").fetchone()
    return counted, actual


def assert_no_write_lock_held(db_path: Path) -> None:
    """Another connection takes the write lock at once: no transaction of the store is open."""
    conn = sqlite3.connect(db_path, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")  # SQLITE_BUSY at once if the store held the lock
        conn.execute("ROLLBACK")
    finally:
        conn.close()


async def test_writes_cancelled_at_any_point_leave_no_open_transaction_nor_half_writes(
    open_store: OpenStore, db_path: Path
) -> None:
    """Every write (create, put_status, claim, reap, cancel) cancelled at each of
    :data:`CANCEL_POINTS`: afterwards the write lock is free, the row counter matches the
    rows, the task reads back whole, and the store still writes."""
    store = await open_store(StoreOptions(max_rows=10_000))
    await store.migrate()
    task = await store.create(NewTask(new_task_id(), work=WorkSpec("job", {})))
    writes: dict[str, Callable[[], Coroutine[Any, Any, object]]] = {
        "create": lambda: store.create(NewTask(new_task_id())),
        "create_expiring": lambda: store.create(NewTask(new_task_id(), ttl_ms=1)),
        "put_status": lambda: store.put_status(task.task_id, Progress("cancelled?")),
        "claim": lambda: store.claim("worker", lease_ms=60_000),
        "reap": store.reap,
        "cancel": lambda: store.cancel(new_task_id(), ANY_OWNER),
    }
    for name, write in writes.items():
        for point in CANCEL_POINTS:
            started = asyncio.ensure_future(write())
            for _ in range(point):
                await asyncio.sleep(0)
            started.cancel()
            try:
                await started
            except asyncio.CancelledError:
                pass
            except TaskNotFound:
                pass  # cancel of an unknown id: answered before the cancellation landed
            # A write queues behind whatever the cancelled write left running on the
            # writing connection's thread (a get does not: reads have a connection of their
            # own); this one changes nothing.
            with pytest.raises(TaskNotFound):
                await store.cancel(new_task_id(), ANY_OWNER)
            current = await store.get(task.task_id, ANY_OWNER)
            assert current.task_id == task.task_id, (name, point)
            assert_no_write_lock_held(db_path)
            counted, actual = counted_and_actual_rows(db_path)
            assert counted == actual, (name, point)
    fresh = await store.create(NewTask(new_task_id()))
    done = await store.put_status(fresh.task_id, Progress("still works"))
    assert done.record.status_message == "still works"
    counted, actual = counted_and_actual_rows(db_path)
    assert counted == actual
