"""S-TTL: a task's TTL never removes it while a worker holds it, nor right after it ended."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks import (
    ANY_OWNER,
    Claimed,
    Complete,
    Fail,
    Outcome,
    Progress,
    Retry,
    Store,
    StoreOptions,
    TaskNotFound,
    TaskRecord,
    TaskStatus,
)
from mcp_tasks_contract.suite.base import (
    BOOM,
    LONG_LEASE_MS,
    ContractBase,
    current,
    expiry,
    in_time,
    job,
    new_task,
)

if TYPE_CHECKING:
    from mcp_tasks_contract.handles import StoreHandles


def assert_ttl_matches(record: TaskRecord) -> None:
    """``ttl_ms`` is rewritten with ``expires_at``: the two always agree."""
    assert record.ttl_ms is not None
    assert record.expires_at == record.created_at + record.ttl_ms


class TTLContract(ContractBase):
    """S-TTL.1-2."""

    @pytest.mark.rule("S-TTL.1", "S-CLAIM.2")
    async def test_a_claim_keeps_the_task_at_least_as_long_as_its_lease(
        self, handles: StoreHandles
    ) -> None:
        """A claim whose lease outlasts the TTL moves expires_at to the lease's end (ttl_ms
        with it): past the old TTL the task answers get, takes the worker's writes and is not
        reaped. A shorter lease and a task without TTL keep their expiry."""
        store = await handles.open()
        made: list[str] = []

        async def claimed_short_lived(ttl_ms: int) -> tuple[TaskRecord, Claimed]:
            record = await new_task(store, work=job(), ttl_ms=ttl_ms)
            made.append(record.task_id)
            claimed = await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=record.task_id)
            if claimed is None:
                raise TaskNotFound  # expired before the claim: in_time tries again
            return record, claimed

        created, claimed = await in_time(claimed_short_lived)
        held = claimed.record
        assert held.expires_at == claimed.lease.expires_at > expiry(created)
        assert_ttl_matches(held)
        assert held.revision == 0
        assert await current(store, created.task_id) == held
        await handles.wait_past(expiry(created))
        seen = await store.get(created.task_id, ANY_OWNER)
        assert seen == held
        written = await store.put_status(created.task_id, Progress("on"), lease=claimed.lease)
        assert written.outcome is Outcome.APPLIED
        assert await store.reap() == len(made) - 1  # only tasks of failed set-up attempts
        assert (await current(store, created.task_id)).status_message == "on"

        long_lived = await new_task(store, work=job(), ttl_ms=10 * LONG_LEASE_MS)
        short_lease = await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=long_lived.task_id)
        assert short_lease is not None
        assert (short_lease.record.ttl_ms, short_lease.record.expires_at) == (
            long_lived.ttl_ms,
            long_lived.expires_at,
        )
        timeless = await new_task(store, work=job(), ttl_ms=None)
        forever = await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=timeless.task_id)
        assert forever is not None
        assert (forever.record.ttl_ms, forever.record.expires_at) == (None, None)

    @pytest.mark.rule("S-TTL.1", "S-RENEW")
    async def test_a_renew_keeps_the_task_at_least_as_long_as_its_lease(
        self, handles: StoreHandles
    ) -> None:
        """Each renew moves expires_at to at least the new lease's end (ttl_ms with it): past
        the TTL and the first lease's end the task still answers get and is not reaped."""
        store = await handles.open()
        made: list[str] = []

        async def renewed_short_lived(ttl_ms: int) -> tuple[TaskRecord, Claimed, Claimed]:
            record = await new_task(store, work=job(), ttl_ms=ttl_ms)
            made.append(record.task_id)
            claimed = await store.claim("w1", lease_ms=ttl_ms, task_id=record.task_id)
            if claimed is None:
                raise TaskNotFound  # expired before the claim: in_time tries again
            lease = await store.renew(claimed.lease, lease_ms=LONG_LEASE_MS)
            return record, claimed, Claimed(await current(store, record.task_id), lease)

        created, first, renewed = await in_time(renewed_short_lived)
        held = renewed.record
        assert held.expires_at == renewed.lease.expires_at > first.lease.expires_at
        assert held.claim is not None
        assert held.claim.expires_at == renewed.lease.expires_at
        assert_ttl_matches(held)
        assert held.revision == 0
        await handles.wait_past(max(expiry(created), first.lease.expires_at))
        assert await store.get(created.task_id, ANY_OWNER) == held
        assert await store.reap() == len(made) - 1  # only tasks of failed set-up attempts

    @pytest.mark.rule("S-TTL.2", "S-PUT.4", "S-CANCEL.1")
    async def test_a_finished_task_stays_readable_for_the_result_retention(
        self, handles: StoreHandles
    ) -> None:
        """Completed, failed (also by a Retry with no delay left) and cancelled tasks are kept
        until at least their end + result_retention_ms, past their TTL: get shows the outcome,
        reap leaves them; afterwards they expire. Tasks without TTL stay without one, and a
        TTL that ends later is kept."""
        before = 0  # the store's clock before the ends

        async def ended(ttl_ms: int) -> tuple[Store, list[TaskRecord], list[TaskRecord]]:
            nonlocal before
            # Each attempt (each its own TTL) in a namespace of its own: a failed attempt's
            # finished tasks keep a retention (5x its TTL) that outlasts a later attempt's
            # TTL (4x), so they would still be there for this test's reaps.
            namespace = f"{handles.namespace}_{ttl_ms}"
            options = StoreOptions(result_retention_ms=5 * ttl_ms)
            store = await handles.open(options, namespace=namespace)
            tasks = [await new_task(store, ttl_ms=ttl_ms, owner="alice") for _ in range(4)]
            before = await handles.now()
            done, failed, retried, cancelled = (task.task_id for task in tasks)
            finished = [
                await store.put_status(done, Complete({"v": 1})),
                await store.put_status(failed, Fail(BOOM)),
                await store.put_status(retried, Retry(BOOM)),
                await store.cancel(cancelled, "alice"),
            ]
            assert all(t.outcome is Outcome.APPLIED for t in finished)
            return store, tasks, [t.record for t in finished]

        store, created, finished = await in_time(ended)
        assert isinstance(store, Store)
        retention = 5 * (created[0].ttl_ms or 0)
        assert [r.status for r in finished] == [
            TaskStatus.COMPLETED,
            TaskStatus.FAILED,
            TaskStatus.FAILED,
            TaskStatus.CANCELLED,
        ]
        for record in finished:
            # now + retention, where the write's now lies between `before` and its
            # last_updated_at (which is at least that now).
            assert record.expires_at is not None
            assert before + retention <= record.expires_at <= record.last_updated_at + retention
            assert_ttl_matches(record)
            assert await current(store, record.task_id) == record
        await handles.wait_past(max(expiry(record) for record in created))
        for record in finished:
            assert await store.get(record.task_id, "alice") == record
        assert await store.reap() == 0  # all four ended: each is kept for its retention
        await handles.wait_past(max(expiry(record) for record in finished))
        for record in finished:
            with pytest.raises(TaskNotFound):
                await store.get(record.task_id, "alice")
        assert await store.reap() == len(finished)

        timeless = await new_task(store, ttl_ms=None)
        done = await store.put_status(timeless.task_id, Complete({"v": 1}))
        assert (done.record.ttl_ms, done.record.expires_at) == (None, None)
        lasting = await new_task(store, ttl_ms=100 * retention)
        done = await store.put_status(lasting.task_id, Fail(BOOM))
        assert (done.record.ttl_ms, done.record.expires_at) == (
            lasting.ttl_ms,
            lasting.expires_at,
        )

    @pytest.mark.rule("S-TTL.2", "S-REAP")
    async def test_no_result_retention_leaves_the_ttl_alone(self, handles: StoreHandles) -> None:
        """With result_retention_ms=0 a task that ends keeps its TTL and expires with it."""
        store = await handles.open(StoreOptions(result_retention_ms=0))
        made: list[str] = []

        async def completed(ttl_ms: int) -> TaskRecord:
            record = await new_task(store, ttl_ms=ttl_ms)
            made.append(record.task_id)
            return (await store.put_status(record.task_id, Complete({"v": 1}))).record

        done = await in_time(completed)
        assert done.status is TaskStatus.COMPLETED
        assert done.expires_at == done.created_at + (done.ttl_ms or 0)
        await handles.wait_past(expiry(done))
        with pytest.raises(TaskNotFound):
            await store.get(done.task_id, ANY_OWNER)
        assert await store.reap() == len(made)
