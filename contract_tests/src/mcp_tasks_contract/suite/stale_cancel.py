"""S-CANCEL.1 when the claim's holder is gone: what a cancel does to a task whose lease ran
out, and what the gone (or superseded) worker and the live one then see."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks import Complete, Outcome, Progress, StaleLease, TaskStatus
from mcp_tasks_contract.suite.base import (
    LONG_LEASE_MS,
    SHORT_MS,
    ContractBase,
    assert_unchanged,
    current,
    job,
    new_task,
)

if TYPE_CHECKING:
    from mcp_tasks_contract.handles import StoreHandles


class StaleCancelContract(ContractBase):
    """S-CANCEL.1 with S-PUT.1 and S-RENEW: a lease that ran out stays stale after a cancel."""

    @pytest.mark.rule("S-CANCEL.1", "S-PUT.1", "S-RENEW")
    async def test_cancel_of_work_whose_lease_ran_out(self, handles: StoreHandles) -> None:
        """A task whose worker's lease ran out (the worker died, nobody took over) is
        cancelled at once, its old claim left as it was. The gone worker's late writes
        then raise StaleLease, since the lease is checked before the status (never the
        cancelled task's ``unchanged``), and so does its renew; nothing it sends is
        written. A write by id (no live claim) answers ``unchanged``; no claim takes it."""
        store, other = await handles.open_many(2)
        record = await new_task(store, owner="alice", work=job())
        gone = await store.claim("w1", lease_ms=SHORT_MS, task_id=record.task_id)
        assert gone is not None
        await handles.wait_past(gone.lease.expires_at)
        cancelled = await other.cancel(record.task_id, "alice")
        assert cancelled.outcome is Outcome.APPLIED
        assert cancelled.record.status is TaskStatus.CANCELLED
        seen = await current(store, record.task_id)
        assert seen == cancelled.record
        assert seen.revision == record.revision + 1
        assert seen.generation == gone.lease.generation
        assert seen.claim == gone.record.claim
        for late in (Progress("still going"), Complete({"v": 1})):
            with pytest.raises(StaleLease):
                await store.put_status(record.task_id, late, lease=gone.lease)
        with pytest.raises(StaleLease):
            await store.renew(gone.lease, lease_ms=LONG_LEASE_MS)
        await assert_unchanged(other, seen)
        by_id = await other.put_status(record.task_id, Complete({"v": 1}))
        assert by_id.outcome is Outcome.UNCHANGED
        assert by_id.record == seen
        assert await other.claim("w2", lease_ms=LONG_LEASE_MS, task_id=record.task_id) is None
        await assert_unchanged(store, seen)

    @pytest.mark.rule("S-CANCEL.1", "S-PUT.1", "S-RENEW")
    async def test_cancel_of_work_taken_over_after_a_lease_ran_out(
        self, handles: StoreHandles
    ) -> None:
        """The first worker's lease ran out and a second worker claimed the task before the
        cancel: the cancel leaves the second worker's claim, which discovers it (its write
        answers ``unchanged`` with the cancelled record, its renew raises StaleLease); the
        first worker, superseded, gets StaleLease for every write and its renew."""
        store, other = await handles.open_many(2)
        record = await new_task(store, owner="alice", work=job())
        first = await store.claim("w1", lease_ms=SHORT_MS, task_id=record.task_id)
        assert first is not None
        await handles.wait_past(first.lease.expires_at)
        second = await other.claim("w2", lease_ms=LONG_LEASE_MS, task_id=record.task_id)
        assert second is not None
        cancelled = await store.cancel(record.task_id, "alice")
        assert cancelled.outcome is Outcome.APPLIED
        seen = await current(other, record.task_id)
        assert seen == cancelled.record
        assert seen.status is TaskStatus.CANCELLED
        assert seen.generation == second.lease.generation == first.lease.generation + 1
        assert seen.claim == second.record.claim
        for late in (Progress("still going"), Complete({"v": 1})):
            with pytest.raises(StaleLease):
                await store.put_status(record.task_id, late, lease=first.lease)
        with pytest.raises(StaleLease):
            await store.renew(first.lease, lease_ms=LONG_LEASE_MS)
        await assert_unchanged(other, seen)
        live = await other.put_status(record.task_id, Complete({"v": 2}), lease=second.lease)
        assert live.outcome is Outcome.UNCHANGED
        assert live.record == seen
        with pytest.raises(StaleLease):
            await other.renew(second.lease, lease_ms=LONG_LEASE_MS)
        await assert_unchanged(store, seen)
