"""S-CANCEL: cancelling a task (``tasks/cancel``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks import (
    ANY_OWNER,
    Complete,
    Fail,
    Outcome,
    Progress,
    StaleLease,
    TaskNotFound,
    TaskStatus,
    new_task_id,
)
from mcp_tasks_contract.suite.base import (
    LONG_LEASE_MS,
    SHORT_MS,
    ContractBase,
    assert_unchanged,
    current,
    expiry,
    job,
    new_task,
)
from mcp_tasks_contract.suite.update import waiting_for

if TYPE_CHECKING:
    from mcp_tasks_contract.handles import StoreHandles


class CancelContract(ContractBase):
    """S-CANCEL.1-2."""

    @pytest.mark.rule("S-CANCEL.1")
    async def test_cancel_of_claimed_work_leaves_the_claim_for_the_worker(
        self, handles: StoreHandles
    ) -> None:
        """A working, claimed task becomes cancelled at once; its worker's lease still matches,
        so the worker discovers the cancellation on its next write (unchanged)."""
        store = await handles.open()
        record = await new_task(store, owner="alice", work=job())
        claimed = await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=record.task_id)
        assert claimed is not None
        transition = await store.cancel(record.task_id, "alice")
        assert transition.outcome is Outcome.APPLIED
        assert transition.record.status is TaskStatus.CANCELLED
        seen = await current(store, record.task_id)
        assert seen.status is TaskStatus.CANCELLED
        assert seen.revision == record.revision + 1
        assert seen.claim is not None
        assert seen.generation == claimed.lease.generation
        late = await store.put_status(record.task_id, Progress("still going"), lease=claimed.lease)
        assert late.outcome is Outcome.UNCHANGED
        assert late.record.status is TaskStatus.CANCELLED
        with pytest.raises(StaleLease):
            await store.renew(claimed.lease, lease_ms=LONG_LEASE_MS)

    @pytest.mark.rule("S-CANCEL.1")
    async def test_cancel_clears_outstanding_input(self, handles: StoreHandles) -> None:
        """Cancelling a task in input_required clears its outstanding requests."""
        store = await handles.open()
        record = await waiting_for(store, "a", "b")
        await store.update(record.task_id, "alice", {"a": 1})
        transition = await store.cancel(record.task_id, "alice")
        assert transition.outcome is Outcome.APPLIED
        seen = await store.get(record.task_id, "alice")
        assert seen.status is TaskStatus.CANCELLED
        assert dict(seen.input_requests) == {}
        assert seen.revision == record.revision + 2

    @pytest.mark.rule("S-CANCEL.2")
    async def test_cancel_of_a_terminal_task_is_unchanged(self, handles: StoreHandles) -> None:
        """Cancelling a completed, failed or cancelled task is acknowledged and writes nothing."""
        store = await handles.open()
        completed = await new_task(store, owner="alice")
        failed = await new_task(store, owner="alice")
        cancelled = await new_task(store, owner="alice")
        await store.put_status(completed.task_id, Complete({"v": 1}))
        await store.put_status(failed.task_id, Fail({"code": -32603, "message": "boom"}))
        await store.cancel(cancelled.task_id, "alice")
        for record in (completed, failed, cancelled):
            before = await current(store, record.task_id)
            transition = await store.cancel(record.task_id, "alice")
            assert transition.outcome is Outcome.UNCHANGED
            assert transition.record == before
            await assert_unchanged(store, before)

    @pytest.mark.rule("S-CANCEL.2", "INV-FOREIGN", "INV-EXPIRED")
    async def test_cancel_of_foreign_unknown_or_expired_is_not_found(
        self, handles: StoreHandles
    ) -> None:
        """Foreign, unknown and expired tasks answer cancel with TaskNotFound; nothing written."""
        store = await handles.open()
        owned = await new_task(store, owner="alice")
        expired = await new_task(store, owner="alice", ttl_ms=SHORT_MS)
        await handles.wait_past(expiry(expired))
        for task_id, caller in (
            (owned.task_id, "mallory"),
            (owned.task_id, None),
            (new_task_id(), "alice"),
            (expired.task_id, "alice"),
            (expired.task_id, ANY_OWNER),
        ):
            with pytest.raises(TaskNotFound):
                await store.cancel(task_id, caller)
        await assert_unchanged(store, owned)

    @pytest.mark.rule("S-CANCEL.3", "S-CANCEL.1")
    async def test_a_cancelled_task_has_no_status_message(self, handles: StoreHandles) -> None:
        """Cancel clears the status message a working or waiting task showed ("Computing
        result" no longer describes it), on every handle; a later write cannot set it."""
        store, other = await handles.open_many(2)
        working = await new_task(store, owner="alice", work=job())
        claimed = await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=working.task_id)
        assert claimed is not None
        await store.put_status(working.task_id, Progress("Computing result"), lease=claimed.lease)
        waiting = await waiting_for(store, "a", owner="alice")
        await store.put_status(waiting.task_id, Progress("Waiting for you"))
        for task_id in (working.task_id, waiting.task_id):
            assert (await current(store, task_id)).status_message is not None
            cancelled = await store.cancel(task_id, "alice")
            assert cancelled.outcome is Outcome.APPLIED
            assert cancelled.record.status is TaskStatus.CANCELLED
            assert cancelled.record.status_message is None
            assert await current(other, task_id) == cancelled.record
        late = await store.put_status(working.task_id, Progress("late"), lease=claimed.lease)
        assert late.outcome is Outcome.UNCHANGED
        assert (await current(other, working.task_id)).status_message is None
