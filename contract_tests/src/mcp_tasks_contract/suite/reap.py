"""S-REAP: removing expired and long-finished tasks (the reap races are in the race tests)."""

from __future__ import annotations

from typing import TYPE_CHECKING

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
    SHORT_MS,
    ContractBase,
    assert_unchanged,
    current,
    expiry,
    in_time,
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


async def one_of_each_status(
    store: Store,
    ttl_ms: int | None,
    *,
    lease_ms: int = LONG_LEASE_MS,
    made: list[str] | None = None,
) -> list[TaskRecord]:
    """Tasks in every status (and one claimed for ``lease_ms``), all with the given TTL; each
    task is set up right after its creation. Every id created is added to ``made``."""
    made = [] if made is None else made

    async def create(owner: str | None = None, *, with_work: bool = False) -> TaskRecord:
        record = await new_task(
            store, ttl_ms=ttl_ms, owner=owner, work=job() if with_work else None
        )
        made.append(record.task_id)
        return record

    working = await create("alice")
    await store.put_status(working.task_id, RequireInput({"a": ELICIT}), event_id="e1")
    await store.update(working.task_id, "alice", {"a": 1})
    claimed = await create(with_work=True)
    if await store.claim("w1", lease_ms=lease_ms, task_id=claimed.task_id) is None:
        raise TaskNotFound  # expired before the claim: in_time tries again
    asking = await create()
    await store.put_status(asking.task_id, RequireInput({"q": ELICIT}))
    completed = await create()
    await store.put_status(completed.task_id, Complete({"v": 1}))
    failed = await create()
    await store.put_status(failed.task_id, Fail(BOOM))
    cancelled = await create("alice")
    await store.cancel(cancelled.task_id, "alice")
    tasks = (working, claimed, asking, completed, failed, cancelled)
    return [await current(store, task.task_id) for task in tasks]


class ReapContract(ContractBase):
    """S-REAP."""

    @pytest.mark.rule("S-REAP")
    async def test_reap_removes_expired_tasks_whatever_their_status(
        self, handles: StoreHandles
    ) -> None:
        """Every task past its TTL goes, in any status, even one still claimed by a lease that
        ran out; live tasks stay. (No result retention here: the TTL alone decides.)"""
        store = await handles.open(StoreOptions(result_retention_ms=0))
        kept = await one_of_each_status(store, ttl_ms=3_600_000)
        made: list[str] = []
        doomed = await in_time(
            lambda ttl_ms: one_of_each_status(store, ttl_ms, lease_ms=SHORT_MS, made=made)
        )
        await handles.wait_past(max(expiry(record) for record in doomed))
        assert doomed[1].claim is not None
        assert await store.reap() == len(made)
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
        await handles.wait_past(max(r.last_updated_at for r in finished) + SHORT_MS)
        assert await eager.reap() == len(finished)
        for record in unfinished:
            await assert_unchanged(patient, record)
        for record in finished:
            await assert_wholly_gone(patient, record)

    @pytest.mark.rule("S-REAP")
    async def test_reap_is_bounded_and_idempotent(self, handles: StoreHandles) -> None:
        """reap removes at most `limit` per call; once all are gone it removes nothing."""
        store = await handles.open()
        created = [await new_task(store, ttl_ms=SHORT_MS) for _ in range(12)]
        await handles.wait_past(max(expiry(record) for record in created))
        assert [await store.reap(limit=5) for _ in range(5)] == [5, 5, 2, 0, 0]
