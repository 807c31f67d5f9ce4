"""The SQLite notifier (the data version): one handle writes, another's notifier hears."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import anyio
import pytest

from mcp_tasks import NewTask, Progress, new_task_id, store_from_url
from mcp_tasks.runtime.notifier import (
    WORK_SIGNAL,
    RelayNotifier,
    Subscription,
    notifier_for,
    signal_key,
)
from mcp_tasks_contract.notifiers import (
    SIGNAL_BOUND_S,
    check_signal_crosses_handles,
    check_task_control_reaches_handles,
)
from mcp_tasks_sqlite.notify import SETTLE_S, FileEvents, SQLiteRelay

if TYPE_CHECKING:
    from pathlib import Path

    from conftest import OpenStore

pytestmark = pytest.mark.anyio


async def test_a_change_published_on_one_handle_wakes_another(open_store: OpenStore) -> None:
    """Two handles on one namespace, as two processes would hold: a task created and
    published through the first wakes a subscriber on the second's notifier."""
    await check_signal_crosses_handles(await open_store(), await open_store())


async def test_a_task_control_write_wakes_another_handle(open_store: OpenStore) -> None:
    """``TaskControl(store)`` on a handle of its own (an external worker's) publishes by
    default: its write wakes a subscriber on another handle's notifier (the file's data version)."""
    await check_task_control_reaches_handles(await open_store(), await open_store())


async def _quiet(changes: Subscription) -> None:
    """Take whatever woke ``changes`` so far (the first change a subscriber sees after it
    subscribed always wakes it: the watcher had not seen its task's version before)."""
    while await changes.wait(0.2):
        changes.take_changed()


async def test_a_change_wakes_only_the_subscribers_of_the_task_that_changed(
    open_store: OpenStore,
) -> None:
    """The file says only that something changed; the watcher reads its subscribers' tasks'
    row versions and wakes the one whose task moved, not every subscriber (each of which
    would re-read its task through the store)."""
    writer, listener = await open_store(), await open_store()
    first = await writer.create(NewTask(new_task_id()))
    second = await writer.create(NewTask(new_task_id()))
    receiver = notifier_for(listener)
    assert isinstance(receiver, RelayNotifier)
    async with (
        receiver.running(),
        receiver.subscribe(first.task_id) as first_changes,
        receiver.subscribe(second.task_id) as second_changes,
    ):
        await writer.cancel(first.task_id, None)  # a change both have not seen yet
        assert await first_changes.wait(SIGNAL_BOUND_S)
        await _quiet(first_changes)
        await _quiet(second_changes)
        await writer.cancel(second.task_id, None)
        assert await second_changes.wait(SIGNAL_BOUND_S)
        assert second_changes.take_changed() == frozenset({signal_key(second.task_id)})
        assert not await first_changes.wait(0.3), "woken by another task's change"


async def test_a_change_wakes_every_subscriber_of_its_task(open_store: OpenStore) -> None:
    """Two subscribers of one task in the listening process (a result waiter and a listen
    stream) are both woken by its change, told that task; a subscriber of another task is
    not. Once one of the two left, the other is still woken by the task's next change."""
    writer, listener = await open_store(), await open_store()
    watched = await writer.create(NewTask(new_task_id()))
    other = await writer.create(NewTask(new_task_id()))
    receiver = notifier_for(listener)
    assert isinstance(receiver, RelayNotifier)
    async with (
        receiver.running(),
        receiver.subscribe(watched.task_id) as staying,
        receiver.subscribe(other.task_id) as elsewhere,
    ):
        async with receiver.subscribe(watched.task_id) as leaving:
            await writer.create(NewTask(new_task_id()))  # first sighting of both tasks
            for changes in (staying, leaving, elsewhere):
                assert await changes.wait(SIGNAL_BOUND_S)
                await _quiet(changes)
            await writer.put_status(watched.task_id, Progress("half way"))
            for changes in (staying, leaving):
                assert await changes.wait(SIGNAL_BOUND_S), "a subscriber of the task slept"
                assert changes.take_changed() == frozenset({signal_key(watched.task_id)})
        await _quiet(staying)
        await writer.cancel(watched.task_id, None)
        assert await staying.wait(SIGNAL_BOUND_S), "the subscriber that stayed slept"
        assert staying.take_changed() == frozenset({signal_key(watched.task_id)})
        assert not await elsewhere.wait(0.3), "woken by another task's change"


async def test_a_task_gone_and_claimable_work_wake_their_subscribers(
    open_store: OpenStore,
) -> None:
    """A watched task whose row is gone (reaped) wakes its subscriber; the work signal,
    which no row holds, wakes on every change (a task for a worker may have come); a
    subscriber of every task is woken by every change."""
    writer, listener = await open_store(), await open_store()
    doomed = await writer.create(NewTask(new_task_id(), ttl_ms=1))
    receiver = notifier_for(listener)
    assert isinstance(receiver, RelayNotifier)
    async with receiver.running(), receiver.subscribe(doomed.task_id) as changes:
        await writer.create(NewTask(new_task_id()))  # first sighting
        await _quiet(changes)
        await anyio.sleep(0.01)  # the TTL runs out
        assert await writer.reap() == 1
        assert await changes.wait(SIGNAL_BOUND_S), "the reaped task's subscriber slept"
    async with (
        receiver.running(),
        receiver.subscribe(WORK_SIGNAL) as work,
        receiver.subscribe() as everything,
    ):
        await writer.create(NewTask(new_task_id()))
        assert await work.wait(SIGNAL_BOUND_S)
        assert await everything.wait(SIGNAL_BOUND_S)
        assert everything.take_changed() is None  # "any task may have changed"


async def test_a_change_before_the_tables_exist_is_heard_without_a_relay_failure(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """At start-up the watcher may see the file change before the store created its tables
    (the store's connection switching a new file to WAL is a write). It wakes its
    subscribers, as for any change it cannot attribute, and keeps listening: no failure."""
    store = store_from_url(f"sqlite:///{db_path}")  # lazy: no tables yet
    receiver = notifier_for(store)
    assert isinstance(receiver, RelayNotifier)
    try:
        async with receiver.running(), receiver.subscribe(new_task_id()) as changes:
            await anyio.to_thread.run_sync(switch_to_wal, db_path)
            assert await changes.wait(SIGNAL_BOUND_S), "the change was not heard"
    finally:
        await store.close()
    failures = [r.getMessage() for r in caplog.records if "relay failed" in r.getMessage()]
    assert failures == []


def switch_to_wal(path: Path) -> None:
    connection = sqlite3.connect(path)
    try:
        connection.execute("PRAGMA journal_mode=WAL").fetchall()
    finally:
        connection.close()


@pytest.mark.parametrize("file_events", [True, False], ids=["file-events", "no-file-events"])
async def test_an_idle_watcher_hears_a_commit_by_another_connection(
    db_path: Path, file_events: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the busy spell of its start, a watcher sleeps until the file is written: a
    commit by another connection wakes it through the file's events (its own check, set
    to once an hour here, never comes), or, where there are no file events, by its reading
    the data version every interval."""
    if not file_events:
        monkeypatch.setattr(FileEvents, "__init__", _no_inotify)
    await anyio.to_thread.run_sync(switch_to_wal, db_path)
    receiver = RelayNotifier(SQLiteRelay(db_path, quiet_check_s=3600))
    async with receiver.running(), receiver.subscribe() as changes:
        await anyio.sleep(2 * SETTLE_S)
        await _quiet(changes)
        await anyio.to_thread.run_sync(_commit_a_row, db_path)
        assert await changes.wait(SIGNAL_BOUND_S), "the commit was not heard"


def _no_inotify(self: FileEvents, path: Path) -> None:
    raise OSError(24, "inotify instance limit reached")


def _commit_a_row(path: Path) -> None:
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("CREATE TABLE IF NOT EXISTS marks (n INTEGER)")
        connection.execute("INSERT INTO marks VALUES (1)")
    finally:
        connection.close()
