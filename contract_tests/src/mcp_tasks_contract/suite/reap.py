"""S-REAP: removing expired and long-finished tasks (the reap races are in the race tests)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from mcp_tasks import (
    ANY_OWNER,
    Complete,
    Fail,
    NewTask,
    RequireInput,
    Store,
    StoreOptions,
    TaskNotFound,
    TaskRecord,
)
from mcp_tasks_contract.suite.base import (
    BOOM,
    ELICIT,
    LONG_LEASE_MS,
    PAST_SHORT_S,
    SHORT_MS,
    ContractBase,
    assert_unchanged,
    current,
    job,
    new_task,
)

if TYPE_CHECKING:
    from mcp_tasks_contract.handles import StoreHandles


async def assert_wholly_gone(store: Store, record: TaskRecord) -> None:
    """Nothing of the task is left: get misses, and its id is free for a brand-new task
    (no stale claim, generation, input keys or events survive)."""
    with pytest.raises(TaskNotFound):
        await store.get(record.task_id, ANY_OWNER)
    reborn = await store.create(NewTask(task_id=record.task_id, owner=record.owner))
    assert (reborn.revision, reborn.generation, reborn.claim) == (0, 0, None)
    assert (reborn.used_input_keys, reborn.recent_events) == (frozenset(), ())
    assert await current(store, record.task_id) == reborn


async def one_of_each_status(store: Store, ttl_ms: int | None) -> list[TaskRecord]:
    """Tasks in every status (and one claimed), all with the given TTL; each task is set up
    right after its creation, so a slow backend does not let it expire half-way."""
    working = await new_task(store, ttl_ms=ttl_ms, owner="alice")
    await store.put_status(working.task_id, RequireInput({"a": ELICIT}), event_id="e1")
    await store.update(working.task_id, "alice", {"a": 1})
    claimed = await new_task(store, ttl_ms=ttl_ms, work=job())
    assert await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=claimed.task_id) is not None
    asking = await new_task(store, ttl_ms=ttl_ms)
    await store.put_status(asking.task_id, RequireInput({"q": ELICIT}))
    completed = await new_task(store, ttl_ms=ttl_ms)
    await store.put_status(completed.task_id, Complete({"v": 1}))
    failed = await new_task(store, ttl_ms=ttl_ms)
    await store.put_status(failed.task_id, Fail(BOOM))
    cancelled = await new_task(store, ttl_ms=ttl_ms, owner="alice")
    await store.cancel(cancelled.task_id, "alice")
    tasks = (working, claimed, asking, completed, failed, cancelled)
    return [await current(store, task.task_id) for task in tasks]


class ReapContract(ContractBase):
    """S-REAP."""

    @pytest.mark.rule("S-REAP")
    async def test_reap_removes_expired_tasks_whatever_their_status(
        self, handles: StoreHandles
    ) -> None:
        """Every task past its TTL goes, in any status and even while claimed; live tasks stay."""
        store = await handles.open()
        kept = await one_of_each_status(store, ttl_ms=3_600_000)
        # Long enough to set each task up on a slow backend, short enough to wait out.
        doomed = await one_of_each_status(store, ttl_ms=1_000)
        await anyio.sleep(1.3)
        assert await store.reap() == len(doomed)
        for record in kept:
            await assert_unchanged(store, record)
        for record in doomed:
            await assert_wholly_gone(store, record)

    @pytest.mark.rule("S-REAP")
    async def test_reap_removes_finished_tasks_without_ttl_after_the_retention(
        self, handles: StoreHandles
    ) -> None:
        """A no-TTL task is removed once terminal for longer than terminal_retention_ms;
        non-terminal no-TTL tasks are never removed."""
        patient = await handles.open()
        eager = await handles.open(StoreOptions(terminal_retention_ms=SHORT_MS))
        tasks = await one_of_each_status(patient, ttl_ms=None)
        unfinished, finished = tasks[:3], tasks[3:]
        assert await patient.reap() == 0
        await anyio.sleep(PAST_SHORT_S)
        assert await eager.reap() == len(finished)
        for record in unfinished:
            await assert_unchanged(patient, record)
        for record in finished:
            await assert_wholly_gone(patient, record)

    @pytest.mark.rule("S-REAP")
    async def test_reap_is_bounded_and_idempotent(self, handles: StoreHandles) -> None:
        """reap removes at most `limit` per call; once all are gone it removes nothing."""
        store = await handles.open()
        for _ in range(12):
            await new_task(store, ttl_ms=SHORT_MS)
        await anyio.sleep(PAST_SHORT_S)
        assert [await store.reap(limit=5) for _ in range(5)] == [5, 5, 2, 0, 0]
