"""The pipeline updates that restate rules (claim, renew, release) write exactly what the pure
rules compute from the same record at the same now (the server's, read back from the
lease the update handed out); the contract suite's stateful test checks the same against
the memory store at random."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from mcp_tasks import ANY_OWNER, NewTask, Retry, StaleLease, WorkSpec, new_task_id
from mcp_tasks.domain import rules

if TYPE_CHECKING:
    from conftest import OpenStore

    from mcp_tasks import Claimed, TaskRecord

pytestmark = pytest.mark.anyio

LEASE_MS = 60_000


def expected_claim(before: TaskRecord, got: Claimed, worker: str) -> Claimed:
    """rules.apply_claim at the now the update used, with the token it minted."""
    now = got.lease.expires_at - LEASE_MS
    computed = rules.apply_claim(before, worker, LEASE_MS, now)
    assert computed.record.claim is not None
    token = got.lease.token
    record = replace(computed.record, claim=replace(computed.record.claim, token=token))
    return replace(computed, record=record, lease=replace(computed.lease, token=token))


@pytest.mark.parametrize("ttl_ms", [None, 1_000, 3_600_000])
@pytest.mark.parametrize("by_id", [True, False])
async def test_claim_writes_what_apply_claim_computes(
    open_store: OpenStore, ttl_ms: int | None, by_id: bool
) -> None:
    """By id and without: generation + 1, the claim, retry_at cleared, the TTL held for the
    lease (a short TTL grows, a long one and none stay); nothing else moves."""
    store = await open_store()
    before = await store.create(NewTask(new_task_id(), ttl_ms=ttl_ms, work=WorkSpec("job")))
    got = await store.claim("w1", lease_ms=LEASE_MS, task_id=before.task_id if by_id else None)
    assert got is not None
    assert got == expected_claim(before, got, "w1")
    assert await store.get(before.task_id, ANY_OWNER) == got.record


async def test_renew_and_release_write_what_the_rules_compute(open_store: OpenStore) -> None:
    """renew: the claim's end and the held TTL; release: the claim gone, generation kept;
    then a stale lease renews to StaleLease and releases to nothing."""
    store = await open_store()
    before = await store.create(NewTask(new_task_id(), ttl_ms=1_000, work=WorkSpec("job")))
    got = await store.claim("w1", lease_ms=LEASE_MS, task_id=before.task_id)
    assert got is not None
    lease = await store.renew(got.lease, lease_ms=2 * LEASE_MS)
    now = lease.expires_at - 2 * LEASE_MS
    renewed = rules.apply_renew(got.record, got.lease, 2 * LEASE_MS, now)
    assert lease == renewed.lease
    assert await store.get(before.task_id, ANY_OWNER) == renewed.record
    await store.release(lease)
    assert await store.get(before.task_id, ANY_OWNER) == rules.apply_release(renewed.record, lease)
    with pytest.raises(StaleLease):
        await store.renew(lease, lease_ms=LEASE_MS)
    await store.release(lease)  # stale: a no-op
    again = await store.claim("w2", lease_ms=LEASE_MS)
    assert again is not None
    assert again.lease.generation == 2


async def test_a_retry_waits_then_claims_in_order(open_store: OpenStore) -> None:
    """A task retried with a delay is not claimable before retry_at (by id or not); the
    oldest other task is taken instead; a retry of 0 is claimable at once."""
    store = await open_store()
    first = await store.create(NewTask(new_task_id(), work=WorkSpec("job", None, None, (0,))))
    second = await store.create(NewTask(new_task_id(), work=WorkSpec("job", None, None, (60_000,))))
    third = await store.create(NewTask(new_task_id(), work=WorkSpec("job")))
    for task in (second, first):
        got = await store.claim("w", lease_ms=LEASE_MS, task_id=task.task_id)
        assert got is not None
        await store.put_status(
            task.task_id, Retry({"code": 1, "message": "again"}), lease=got.lease
        )
    assert await store.claim("w", lease_ms=LEASE_MS, task_id=second.task_id) is None
    taken = [await store.claim("w", lease_ms=LEASE_MS) for _ in range(3)]
    assert [t.record.task_id if t else None for t in taken] == [first.task_id, third.task_id, None]


async def test_a_claim_that_ran_out_is_taken_again_in_claim_order(open_store: OpenStore) -> None:
    """A task whose lease ran out (its worker died) waits in the waiting lane; the next
    claim without an id finds it due and takes it before a younger ready task."""
    store = await open_store()
    first = await store.create(NewTask(new_task_id(), work=WorkSpec("job")))
    second = await store.create(NewTask(new_task_id(), work=WorkSpec("job")))
    dead = await store.claim("w1", lease_ms=1, task_id=first.task_id)
    assert dead is not None
    while (await store._server_now()) <= dead.lease.expires_at:
        pass
    taken = await store.claim("w2", lease_ms=LEASE_MS)
    assert taken is not None
    assert taken.record.task_id == first.task_id
    assert taken.lease.generation == 2
    after = await store.claim("w3", lease_ms=LEASE_MS)
    assert after is not None
    assert after.record.task_id == second.task_id
