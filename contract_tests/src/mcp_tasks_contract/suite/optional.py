"""The optional behaviours (``O-…``): proven when the store's ``offers`` declares them;
the plugin leaves the others out of the run and reports them "not offered"."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
import pytest

from mcp_tasks import (
    ANY_OWNER,
    Complete,
    Progress,
    TaskNotFound,
    drop_namespace,
    namespaced_url,
    store_from_url,
)
from mcp_tasks.stores.abilities import Located, Rewrites
from mcp_tasks.stores.observed import unobserved
from mcp_tasks_contract.notifiers import check_signal_crosses_handles
from mcp_tasks_contract.offers import BEHAVIOURS
from mcp_tasks_contract.population import assert_survived, populate, snapshot
from mcp_tasks_contract.suite.base import (
    LONG_LEASE_MS,
    SHORT_MS,
    ContractBase,
    current,
    expiry,
    job,
    new_task,
)

if TYPE_CHECKING:
    from mcp_tasks import Store, TaskRecord
    from mcp_tasks_contract.handles import StoreHandles
    from mcp_tasks_contract.suite.base import ServerRestart


class OptionalContract(ContractBase):
    """O-CLOCK, O-NAMESPACES, O-NOTIFIER, O-RESTART, O-REWRITE: only what ``offers``
    declares."""

    def require(self, behaviour: str) -> None:
        """Skip, saying "not offered", unless ``offers`` declares ``behaviour`` (only when
        the plugin, which leaves such tests out, is not loaded)."""
        if not getattr(self.offers, behaviour):
            pytest.skip(
                f"not offered: {BEHAVIOURS[behaviour]} "
                f"({type(self).__name__}.offers.{behaviour} is False)"
            )

    @pytest.mark.rule("O-CLOCK")
    async def test_an_injected_clock_is_the_stores_time(self, handles: StoreHandles) -> None:
        """With ``offers.clock``, every handle keeps the suite's ManualClock: a task is
        created at its now and expires exactly when it is advanced past the TTL."""
        self.require("clock")
        clock = handles.clock
        assert clock is not None, "offers.clock is set but the store_clock fixture gave None"
        store = await handles.open()
        task = await new_task(store, ttl_ms=1_000)
        assert (task.created_at, task.expires_at) == (clock(), clock() + 1_000)
        clock.advance(999)
        assert await current(store, task.task_id) == task
        clock.advance(1)
        with pytest.raises(TaskNotFound):
            await current(store, task.task_id)

    @pytest.mark.rule("O-NAMESPACES")
    async def test_a_url_namespace_is_isolated_and_dropped(self, handles: StoreHandles) -> None:
        """With ``offers.namespaces``, the handle's location pointed at another namespace
        (``namespaced_url``) opens a store that shares nothing with the first; after
        ``drop_namespace`` its task is gone."""
        self.require("namespaces")
        store = unobserved(await handles.open())  # the store inside an encrypting handle
        assert isinstance(store, Located), (
            "offers.namespaces is set but the handle has no location (stores.abilities.Located)"
        )
        other_url = namespaced_url(store.location.url, handles.namespace + "_other")
        other = store_from_url(other_url)
        try:
            task = await new_task(other)
            with pytest.raises(TaskNotFound):
                await store.get(task.task_id, ANY_OWNER)
        finally:
            await other.close()
        await drop_namespace(other_url)
        reopened = store_from_url(other_url)
        try:
            with pytest.raises(TaskNotFound):
                await reopened.get(task.task_id, ANY_OWNER)
        finally:
            await reopened.close()
            await drop_namespace(other_url)

    @pytest.mark.rule("O-NOTIFIER")
    async def test_a_change_wakes_a_subscriber_on_another_handle(
        self, handles: StoreHandles
    ) -> None:
        """With ``offers.notifier``, the notifier registered for the store's scheme relays:
        a task published on one handle's notifier wakes its subscriber on another's."""
        self.require("notifier")
        await check_signal_crosses_handles(await handles.open(), await handles.open())

    @pytest.mark.rule("O-RESTART")
    async def test_tasks_survive_a_restart_of_the_server(
        self, handles: StoreHandles, store_server_restart: ServerRestart
    ) -> None:
        """With ``offers.server_restart``, 1 000 tasks in all five statuses, with live claims,
        are identical on a new handle after ``store_server_restart`` restarted the server."""
        self.require("server_restart")
        first = await handles.open()
        ids, leases = await populate(first)
        before = await snapshot(first, ids)
        await first.close()
        await store_server_restart()
        await assert_survived(await handles.open(), before, leases)

    @pytest.mark.rule("O-REWRITE")
    async def test_a_rewrite_writes_each_payload_once_and_loses_no_write(
        self, handles: StoreHandles
    ) -> None:
        """With ``offers.rewrite``, ``rewrite_after`` from ``None`` visits every task once, in
        id order (expired ones too), then answers ``None``; what the function returns
        replaces the payload (status message, result, work), and nothing else of the task
        changes: revision, times, status, claim, generation. Then passes of it run while
        other handles write progress to the same tasks: every write is kept (the revision
        counts them all, the last message is the last write's), as a compare-and-set
        guarantees."""
        self.require("rewrite")
        # On the stores themselves (inside an encrypting handle): a rewrite sees and writes
        # what the store holds.
        store = rewriting(await handles.open())
        other = unobserved(await handles.open())
        claimed = await new_task(other, work=job(), status_message="claimed")
        assert await other.claim("w1", lease_ms=LONG_LEASE_MS, task_id=claimed.task_id)
        done = await new_task(other, owner="alice", status_message="done")
        await other.put_status(done.task_id, Complete({"v": 1}))
        short = await new_task(other, ttl_ms=SHORT_MS, status_message="short")
        await handles.wait_past(expiry(short))
        ids = sorted(t.task_id for t in (claimed, done, short))
        before = {i: await raw_record(store, i) for i in ids}

        def mark(record: TaskRecord) -> TaskRecord:
            result = None if record.result is None else {**record.result, "rewritten": True}
            message = f"{record.status_message}+r"
            return replace(record, status_message=message, result=result)

        visited, after = [], None
        while (after := await store.rewrite_after(after, mark)) is not None:
            visited.append(after)
        assert visited == ids
        for task_id in (claimed.task_id, done.task_id):
            now = await current(other, task_id)
            was = before[task_id]
            assert now.status_message == f"{was.status_message}+r"
            assert now == replace(
                was,
                status_message=now.status_message,
                result=None if was.result is None else {**was.result, "rewritten": True},
            )

        # Beside writers.
        rewriter = store
        writers = [unobserved(handle) for handle in await handles.open_many(3)]
        tasks = [await new_task(writers[0]) for _ in range(6)]
        writes = 8

        def tilde(record: TaskRecord) -> TaskRecord | None:
            message = record.status_message or ""
            return None if message.endswith("~") else replace(record, status_message=message + "~")

        async def write(handle: Store, task_id: str) -> None:
            for n in range(writes):
                await handle.put_status(task_id, Progress(f"m{n}"))

        async def rewrite_passes() -> None:
            for _ in range(4):
                after = None
                while (after := await rewriter.rewrite_after(after, tilde)) is not None:
                    await anyio.lowlevel.checkpoint()

        async with anyio.create_task_group() as group:
            group.start_soon(rewrite_passes)
            for i, task in enumerate(tasks):
                group.start_soon(write, writers[i % len(writers)], task.task_id)
        for task in tasks:
            final = await current(writers[0], task.task_id)
            assert final.revision == writes
            assert final.status_message in (f"m{writes - 1}", f"m{writes - 1}~")


def rewriting(store: Store) -> Rewrites:
    """The store inside a handle (an encrypting one too), which must offer rewrites."""
    inner = unobserved(store)
    assert isinstance(inner, Rewrites), (
        "offers.rewrite is set but the handle has no rewrite_after() (stores.abilities.Rewrites)"
    )
    return inner


async def raw_record(store: Rewrites, task_id: str) -> TaskRecord:
    """The task as the store holds it, expired or not (read by a rewrite that writes nothing)."""
    found: list[TaskRecord] = []

    def keep(record: TaskRecord) -> None:
        if record.task_id == task_id:
            found.append(record)

    after = None
    while not found and (after := await store.rewrite_after(after, keep)) is not None:
        pass
    return found[0]
