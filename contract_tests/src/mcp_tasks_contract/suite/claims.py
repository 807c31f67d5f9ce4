"""S-CLAIM, S-RENEW, S-RELEASE: how workers take, keep and give back tasks."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from mcp_tasks import (
    Claimed,
    Complete,
    Fail,
    Outcome,
    Progress,
    Retry,
    StaleLease,
    TaskNotFound,
    TaskRecord,
    TaskStatus,
    new_task_id,
)
from mcp_tasks_contract.suite.base import (
    BOOM,
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


#: Long enough for a slow server to write the end under the lease, short enough to wait out.
ENDED_LEASE_MS = 1_000


class ClaimContract(ContractBase):
    """S-CLAIM.1-2, S-RENEW, S-RELEASE (the claim races are in the race tests)."""

    @pytest.mark.rule("S-CLAIM.1")
    async def test_claim_takes_the_oldest_eligible_task(self, handles: StoreHandles) -> None:
        """Claims without a task id come in (created_at, task_id) order."""
        store = await handles.open()
        created = [await new_task(store, work=job()) for _ in range(6)]
        expected = [r.task_id for r in sorted(created, key=lambda r: (r.created_at, r.task_id))]
        taken = []
        for _ in created:
            claimed = await store.claim("w1", lease_ms=LONG_LEASE_MS)
            assert claimed is not None
            taken.append(claimed.record.task_id)
        assert taken == expected
        assert await store.claim("w1", lease_ms=LONG_LEASE_MS) is None

    @pytest.mark.rule("S-CLAIM.1")
    async def test_claim_skips_ineligible_tasks(self, handles: StoreHandles) -> None:
        """Terminal, manual (no work), not yet due and claimed tasks are all skipped, though
        each is older than the one eligible task (every task here has a ``created_at`` of
        its own, so the oldest-first order alone would take any of them first)."""
        store = await handles.open()

        async def older(**fields: Any) -> TaskRecord:
            record = await new_task(store, **fields)
            await handles.wait_past(record.created_at)  # the next task is strictly younger
            return record

        completed = await older(work=job())
        await store.put_status(completed.task_id, Complete({"v": 1}))
        cancelled = await older(work=job(), owner="alice")
        await store.cancel(cancelled.task_id, "alice")
        failed = await older(work=job())
        await store.put_status(failed.task_id, Fail(BOOM))
        manual = await older()
        later = await older(work=job(3_600_000))
        held = await store.claim("w0", lease_ms=LONG_LEASE_MS, task_id=later.task_id)
        assert held is not None
        await store.put_status(later.task_id, Retry(BOOM), lease=held.lease)
        busy = await older(work=job())
        assert await store.claim("w0", lease_ms=LONG_LEASE_MS, task_id=busy.task_id) is not None
        eligible = await new_task(store, work=job())
        skipped_records = (completed, cancelled, failed, manual, later, busy)
        assert all(r.created_at < eligible.created_at for r in skipped_records)
        claimed = await store.claim("w1", lease_ms=LONG_LEASE_MS)
        assert claimed is not None
        assert claimed.record.task_id == eligible.task_id
        assert await store.claim("w1", lease_ms=LONG_LEASE_MS) is None
        for skipped in skipped_records:
            assert await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=skipped.task_id) is None

    @pytest.mark.rule("S-CLAIM.1", "INV-TERMINAL")
    async def test_a_task_that_ended_under_a_claim_is_never_claimed_again(
        self, handles: StoreHandles
    ) -> None:
        """A runner does not release the claim of a task it finished: once that claim runs
        out, the task is still never claimed, with or without its id (completed, failed, or
        cancelled while claimed)."""
        store = await handles.open()
        ended: list[str] = []
        lease_ends = 0
        for change in (Complete({"v": 1}), Fail(BOOM), None):
            record = await new_task(store, work=job())
            claimed = await store.claim("w1", lease_ms=ENDED_LEASE_MS, task_id=record.task_id)
            assert claimed is not None
            if change is None:
                await store.cancel(record.task_id, None)
            else:
                done = await store.put_status(record.task_id, change, lease=claimed.lease)
                assert done.outcome is Outcome.APPLIED
            ended.append(record.task_id)
            lease_ends = max(lease_ends, claimed.lease.expires_at)
        await handles.wait_past(lease_ends)
        assert await store.claim("w2", lease_ms=LONG_LEASE_MS) is None
        for task_id in ended:
            assert await store.claim("w2", lease_ms=LONG_LEASE_MS, task_id=task_id) is None
            assert (await current(store, task_id)).status.is_terminal

    @pytest.mark.rule("S-CLAIM.1")
    async def test_claim_by_id_takes_that_task_or_nothing(self, handles: StoreHandles) -> None:
        """With task_id, claim takes exactly that task (not the oldest), or returns None."""
        store = await handles.open()
        await new_task(store, work=job())
        wanted = await new_task(store, work=job())
        claimed = await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=wanted.task_id)
        assert claimed is not None
        assert claimed.record.task_id == claimed.lease.task_id == wanted.task_id
        assert await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=wanted.task_id) is None
        assert await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=new_task_id()) is None

    @pytest.mark.rule("S-CLAIM.1", "INV-EXPIRED")
    async def test_expired_tasks_are_never_claimed(self, handles: StoreHandles) -> None:
        """A task whose TTL passed is not eligible, by id or not."""
        store = await handles.open()
        expired = await new_task(store, work=job(), ttl_ms=SHORT_MS)
        await handles.wait_past(expiry(expired))
        assert await store.claim("w1", lease_ms=LONG_LEASE_MS) is None
        assert await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=expired.task_id) is None

    @pytest.mark.rule("S-CLAIM.4")
    async def test_a_claim_for_some_work_types_takes_only_those(
        self, handles: StoreHandles
    ) -> None:
        """Claims for some work types take the oldest eligible task of those types, in claim
        order, and never a task of another type: not by id, not when it is older. No type
        asked for (an empty set) claims nothing; ``None`` claims any type."""
        store = await handles.open()
        created: list[TaskRecord] = []
        for kind in ("alpha", "beta", "gamma", "beta", "alpha", "gamma"):
            created.append(await new_task(store, work=job(kind=kind)))
            await handles.wait_past(created[-1].created_at)  # a strict order of ages

        def ids(*kinds: str) -> list[str]:
            return [r.task_id for r in created if r.work is not None and r.work.type in kinds]

        alpha = ids("alpha")
        for task_id in alpha:  # not by id either
            assert (
                await store.claim(
                    "w", lease_ms=LONG_LEASE_MS, task_id=task_id, work_types=frozenset({"beta"})
                )
                is None
            )
        assert await store.claim("w", lease_ms=LONG_LEASE_MS, work_types=frozenset()) is None
        taken = []
        while claimed := await store.claim(
            "w", lease_ms=LONG_LEASE_MS, work_types=frozenset({"beta", "gamma"})
        ):
            taken.append(claimed.record.task_id)
        assert taken == ids("beta", "gamma")
        for task_id in alpha:  # untouched by the claims that skipped them
            assert (await current(store, task_id)).generation == 0
        claimed = await store.claim(
            "w", lease_ms=LONG_LEASE_MS, task_id=alpha[1], work_types=frozenset({"alpha"})
        )
        assert claimed is not None
        assert claimed.record.task_id == alpha[1]
        claimed = await store.claim("w", lease_ms=LONG_LEASE_MS, work_types=None)
        assert claimed is not None
        assert claimed.record.task_id == alpha[0]
        assert await store.claim("w", lease_ms=LONG_LEASE_MS) is None

    @pytest.mark.rule("S-CLAIM.4")
    async def test_a_task_of_a_type_nobody_claims_waits_for_a_claim_of_its_type(
        self, handles: StoreHandles
    ) -> None:
        """A task no claim asks for stays as it is, however often others claim, whether it
        is new, its lease ran out, or its retry came due; the first claim for its type
        takes it (on another handle too)."""
        store, other = await handles.open(), await handles.open()
        beta = frozenset({"beta"})
        new = await new_task(store, work=job(kind="alpha"))
        lapsed = await new_task(store, work=job(kind="alpha"))
        held = await store.claim("w0", lease_ms=SHORT_MS, task_id=lapsed.task_id)
        assert held is not None
        due = await new_task(store, work=job(SHORT_MS, kind="alpha"))
        retried = await store.claim("w0", lease_ms=LONG_LEASE_MS, task_id=due.task_id)
        assert retried is not None
        await store.put_status(due.task_id, Retry(BOOM), lease=retried.lease)
        waiting = [await current(store, r.task_id) for r in (new, lapsed, due)]
        await handles.wait_past(max(held.lease.expires_at, waiting[2].retry_at or 0))
        for _ in range(3):
            assert await other.claim("w1", lease_ms=LONG_LEASE_MS, work_types=beta) is None
        for record in waiting:
            await assert_unchanged(store, record)
        taken = set()
        while claimed := await other.claim(
            "w2", lease_ms=LONG_LEASE_MS, work_types=frozenset({"alpha"})
        ):
            taken.add(claimed.record.task_id)
        assert taken == {new.task_id, lapsed.task_id, due.task_id}

    @pytest.mark.rule("S-CLAIM.4", "S-REAP")
    async def test_a_task_nobody_claims_still_expires_and_is_reaped(
        self, handles: StoreHandles
    ) -> None:
        """Waiting for a claim of its type does not hold a task past its TTL."""
        store = await handles.open()
        record = await new_task(store, work=job(kind="alpha"), ttl_ms=SHORT_MS)
        assert (
            await store.claim("w1", lease_ms=LONG_LEASE_MS, work_types=frozenset({"beta"})) is None
        )
        await handles.wait_past(expiry(record))
        assert (
            await store.claim("w1", lease_ms=LONG_LEASE_MS, work_types=frozenset({"alpha"})) is None
        )
        assert await store.reap() == 1
        with pytest.raises(TaskNotFound):
            await current(store, record.task_id)

    @pytest.mark.rule("S-CLAIM.2", "INV-CLAIM")
    async def test_each_claim_gets_the_next_generation_and_a_fresh_token(
        self, handles: StoreHandles
    ) -> None:
        """Claim → generation 1; after its lease expires a new claim gets generation 2, another
        token, and the old lease is stale. Claims never change the revision."""
        store = await handles.open()
        record = await new_task(store, work=job())
        first = await store.claim("w1", lease_ms=SHORT_MS, task_id=record.task_id)
        assert first is not None
        assert (first.lease.generation, first.lease.worker_id) == (1, "w1")
        assert first.lease.expires_at >= first.record.created_at + SHORT_MS
        await handles.wait_past(first.lease.expires_at)
        second = await store.claim("w2", lease_ms=LONG_LEASE_MS, task_id=record.task_id)
        assert second is not None
        assert second.lease.generation == 2
        assert second.lease.token != first.lease.token
        assert second.lease.expires_at >= first.lease.expires_at + LONG_LEASE_MS - SHORT_MS
        seen = await current(store, record.task_id)
        assert (seen.revision, seen.generation) == (0, 2)
        assert seen.claim is not None
        assert (seen.claim.worker_id, seen.claim.token) == ("w2", second.lease.token)
        with pytest.raises(StaleLease):
            await store.put_status(record.task_id, Progress("late"), lease=first.lease)
        await assert_unchanged(store, seen)
        ok = await store.put_status(record.task_id, Progress("mine"), lease=second.lease)
        assert ok.outcome is Outcome.APPLIED

    @pytest.mark.rule("S-RENEW")
    async def test_renew_extends_a_live_lease(self, handles: StoreHandles) -> None:
        """renew keeps token and generation, moves expires_at forward, leaves the revision."""
        store = await handles.open()
        record = await new_task(store, work=job())
        claimed = await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=record.task_id)
        assert claimed is not None
        # Twice as long: the new end is later even if the store's clock has not moved.
        renewed = await store.renew(claimed.lease, lease_ms=2 * LONG_LEASE_MS)
        assert (renewed.token, renewed.generation, renewed.task_id) == (
            claimed.lease.token,
            claimed.lease.generation,
            record.task_id,
        )
        assert renewed.expires_at > claimed.lease.expires_at
        seen = await current(store, record.task_id)
        assert seen.revision == 0
        assert seen.claim is not None
        assert seen.claim.expires_at == renewed.expires_at
        ok = await store.put_status(record.task_id, Progress("still mine"), lease=renewed)
        assert ok.outcome is Outcome.APPLIED

    @pytest.mark.rule("S-RENEW", "INV-NOPARTIAL")
    async def test_renew_of_an_expired_lease_is_stale(self, handles: StoreHandles) -> None:
        """A lease that ran out by the store clock cannot be renewed, even if nobody took over."""
        store = await handles.open()
        record = await new_task(store, work=job())
        claimed = await store.claim("w1", lease_ms=SHORT_MS, task_id=record.task_id)
        assert claimed is not None
        await handles.wait_past(claimed.lease.expires_at)
        before = await current(store, record.task_id)
        with pytest.raises(StaleLease):
            await store.renew(claimed.lease, lease_ms=LONG_LEASE_MS)
        await assert_unchanged(store, before)

    @pytest.mark.rule("S-RENEW")
    async def test_renew_of_a_superseded_finished_or_gone_task_is_stale(
        self, handles: StoreHandles
    ) -> None:
        """renew raises StaleLease for a forged token, a finished task and a reaped task."""
        store = await handles.open()
        record = await new_task(store, work=job())
        claimed = await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=record.task_id)
        assert claimed is not None
        held = await current(store, record.task_id)
        with pytest.raises(StaleLease):
            await store.renew(replace(claimed.lease, token="forged"), lease_ms=LONG_LEASE_MS)
        await assert_unchanged(store, held)
        done = await store.put_status(record.task_id, Complete({"v": 1}), lease=claimed.lease)
        with pytest.raises(StaleLease):
            await store.renew(claimed.lease, lease_ms=LONG_LEASE_MS)
        await assert_unchanged(store, done.record)
        made: list[str] = []

        async def claim_short_lived(ttl_ms: int) -> Claimed:
            short = await new_task(store, work=job(), ttl_ms=ttl_ms)
            made.append(short.task_id)
            claimed = await store.claim("w1", lease_ms=SHORT_MS, task_id=short.task_id)
            if claimed is None:
                raise TaskNotFound  # expired before the claim: in_time tries again
            return claimed

        doomed = await in_time(claim_short_lived)
        # A live lease holds its task (S-TTL.1): it is reaped once lease and TTL ran out.
        await handles.wait_past(expiry(doomed.record))
        assert await store.reap() == len(made)
        with pytest.raises(StaleLease):
            await store.renew(doomed.lease, lease_ms=LONG_LEASE_MS)

    @pytest.mark.rule("S-RENEW", "S-RELEASE", "S-PUT.1")
    async def test_a_lease_of_another_generation_is_stale_even_with_the_right_token(
        self, handles: StoreHandles
    ) -> None:
        """The generation fences as the token does: a lease with the live claim's token but
        an older (or a newer) generation renews to StaleLease, writes to StaleLease and
        releases to nothing; the live claim stays as it was."""
        store = await handles.open()
        record = await new_task(store, work=job())
        first = await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=record.task_id)
        assert first is not None
        await store.release(first.lease)
        live = await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=record.task_id)
        assert live is not None
        assert live.lease.generation == 2
        before = await current(store, record.task_id)
        for generation in (1, 3):
            forged = replace(live.lease, generation=generation)
            with pytest.raises(StaleLease):
                await store.renew(forged, lease_ms=2 * LONG_LEASE_MS)
            await assert_unchanged(store, before)
            with pytest.raises(StaleLease):
                await store.put_status(record.task_id, Progress("forged"), lease=forged)
            await assert_unchanged(store, before)
            await store.release(forged)
            await assert_unchanged(store, before)
        renewed = await store.renew(live.lease, lease_ms=2 * LONG_LEASE_MS)
        assert renewed.generation == 2

    @pytest.mark.rule("S-RELEASE", "INV-CLAIM")
    async def test_release_frees_the_claim_and_keeps_the_generation(
        self, handles: StoreHandles
    ) -> None:
        """After release the task is claimable at once; the next claim is generation + 1."""
        store = await handles.open()
        record = await new_task(store, work=job())
        claimed = await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=record.task_id)
        assert claimed is not None
        await store.release(claimed.lease)
        seen = await current(store, record.task_id)
        assert (seen.claim, seen.generation, seen.revision) == (None, 1, 0)
        again = await store.claim("w2", lease_ms=LONG_LEASE_MS)
        assert again is not None
        assert again.lease.generation == 2
        with pytest.raises(StaleLease):
            await store.put_status(record.task_id, Progress("x"), lease=claimed.lease)
        await assert_unchanged(store, again.record)

    @pytest.mark.rule("S-RELEASE")
    async def test_release_of_a_stale_lease_is_a_no_op(self, handles: StoreHandles) -> None:
        """Releasing a superseded or forged lease changes nothing; the live claim stays."""
        store = await handles.open()
        record = await new_task(store, work=job())
        first = await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=record.task_id)
        assert first is not None
        await store.release(first.lease)
        second = await store.claim("w2", lease_ms=LONG_LEASE_MS, task_id=record.task_id)
        assert second is not None
        before = await current(store, record.task_id)
        await store.release(first.lease)
        await store.release(replace(second.lease, token="forged"))
        await store.release(replace(second.lease, task_id=new_task_id()))
        await assert_unchanged(store, before)
        assert before.status is TaskStatus.WORKING
