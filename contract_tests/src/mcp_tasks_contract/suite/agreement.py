"""The store writes what the rule computes: each write's record is the pure rule's.

A store may restate rules of :mod:`mcp_tasks.domain.rules` server-side (Redis's Lua scripts,
MongoDB's pipelines, SQL predicates); whatever it computes must agree with them. Each test
here writes through the Store API and compares the record (and the transition, claim or
lease) with what the rule computes from the record before the write at the store's now,
read back from what the store wrote: a claim's or renew's end minus its lease, or a write's
``last_updated_at`` once the store's clock is past the previous one (``rules._applied``
then takes the store's now as it is). The stateful test checks the same against the memory
store on random sequences; these name each rule's cases one by one.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

import pytest

from mcp_tasks import (
    ANY_OWNER,
    Complete,
    Fail,
    NewTask,
    Progress,
    RequireInput,
    Retry,
    StaleLease,
    StoreOptions,
    WorkSpec,
    new_task_id,
)
from mcp_tasks.domain import rules
from mcp_tasks.stores.encrypted import TaskSeal, reseal
from mcp_tasks_contract.suite.base import SHORT_MS, ContractBase

if TYPE_CHECKING:
    from mcp_tasks import Claimed, StatusChange, Store, TaskRecord, Transition
    from mcp_tasks.domain.jsonsafe import JSONObject
    from mcp_tasks_contract.handles import StoreHandles

#: The lease of these tests: long enough never to run out during one.
LEASE_MS: Final = 60_000

#: JSON a server-side round trip could change (a Lua cjson, a document codec): empty
#: arrays and objects, integers beyond 2^53, float spelling, escapes, text that looks like
#: a store's own markers.
AWKWARD: Final[JSONObject] = {
    "empty list": [],
    "empty object": {},
    "big": 2**63 - 1,
    "tenth": 0.1,
    "text": 'é / \\ " \u0000 ☃ =',
    "nested": [[], {}, [{}], {"": []}],
}

ELICIT: Final[JSONObject] = {
    "method": "elicitation/create",
    "params": {"message": "?", "requestedSchema": {}},
}
AGAIN: Final[JSONObject] = {"code": 1, "message": "again"}

#: Every kind of status change, with and without its optional parts.
CHANGES: Final[tuple[StatusChange, ...]] = (
    Progress("half way"),
    Progress(None),  # type: ignore[arg-type]  # the stores write a None message as none
    RequireInput({"k": ELICIT}, status_message="asking"),
    Complete({"content": [], "structuredContent": AWKWARD}),
    Complete({"content": []}, status_message=""),
    Fail({"code": -1, "message": "boom", "data": AWKWARD}),
    Fail({"code": -1, "message": ""}),
    Retry(AGAIN),
    Retry(AGAIN, status_message="retrying"),
)


def expected_claim(before: TaskRecord, got: Claimed, worker: str) -> Claimed:
    """rules.apply_claim at the now the store used, with the token it minted."""
    now = got.lease.expires_at - LEASE_MS
    computed = rules.apply_claim(before, worker, LEASE_MS, now)
    assert computed.record.claim is not None
    token = got.lease.token
    record = replace(computed.record, claim=replace(computed.record.claim, token=token))
    return replace(computed, record=record, lease=replace(computed.lease, token=token))


async def after_a_moment(handles: StoreHandles, record: TaskRecord) -> None:
    """Once the store's clock is past ``record``'s last write by more than a millisecond,
    the next write's ``last_updated_at`` is the store's now itself."""
    await handles.wait_past(record.last_updated_at + 1)


def write_now(before: TaskRecord, after: TaskRecord) -> int:
    """The store's now when ``after`` was written (see :func:`after_a_moment`)."""
    assert after.last_updated_at > before.last_updated_at + 1
    return after.last_updated_at


async def new_in_order(handles: StoreHandles, store: Store, work: WorkSpec) -> TaskRecord:
    """A task created after the store's clock passed every earlier one's ``created_at``:
    tasks made one after another this way have distinct ``created_at`` in that order."""
    record = await store.create(NewTask(new_task_id(), work=work))
    await handles.wait_past(record.created_at)
    return record


class RuleAgreementContract(ContractBase):
    """Each write's record equals the pure rule's (claim, renew, release, put, update,
    cancel, the claim lanes and order)."""

    @pytest.mark.rule("S-CLAIM.2", "S-TTL.1")
    async def test_claim_writes_what_apply_claim_computes(self, handles: StoreHandles) -> None:
        """By id and without, on a task without TTL, a TTL shorter and one longer than the
        lease: generation + 1, the claim, retry_at cleared, the TTL held for the lease (the
        short one grows, the long one and none stay), nothing else moves; exactly
        rules.apply_claim."""
        store = await handles.open()
        for ttl_ms in (None, LEASE_MS // 2, 100 * LEASE_MS):
            for by_id in (True, False):
                work = WorkSpec("job")
                before = await store.create(NewTask(new_task_id(), ttl_ms=ttl_ms, work=work))
                task_id = before.task_id if by_id else None
                got = await store.claim("w1", lease_ms=LEASE_MS, task_id=task_id)
                assert got is not None
                assert got == expected_claim(before, got, "w1"), (ttl_ms, by_id)
                assert await store.get(before.task_id, ANY_OWNER) == got.record

    @pytest.mark.rule("S-RENEW", "S-RELEASE", "S-TTL.1")
    async def test_renew_and_release_write_what_the_rules_compute(
        self, handles: StoreHandles
    ) -> None:
        """renew: the claim's end and the held TTL (rules.apply_renew); release: the claim
        gone, generation kept (rules.apply_release); then the released lease renews to
        StaleLease and releases to nothing, and the next claim is generation 2."""
        store = await handles.open()
        work = WorkSpec("job")
        before = await store.create(NewTask(new_task_id(), ttl_ms=LEASE_MS // 2, work=work))
        got = await store.claim("w1", lease_ms=LEASE_MS, task_id=before.task_id)
        assert got is not None
        lease = await store.renew(got.lease, lease_ms=2 * LEASE_MS)
        now = lease.expires_at - 2 * LEASE_MS
        renewed = rules.apply_renew(got.record, got.lease, 2 * LEASE_MS, now)
        assert lease == renewed.lease
        assert await store.get(before.task_id, ANY_OWNER) == renewed.record
        await store.release(lease)
        released = rules.apply_release(renewed.record, lease)
        assert await store.get(before.task_id, ANY_OWNER) == released
        with pytest.raises(StaleLease):
            await store.renew(lease, lease_ms=LEASE_MS)
        await store.release(lease)  # stale: a no-op
        assert await store.get(before.task_id, ANY_OWNER) == released
        again = await store.claim("w2", lease_ms=LEASE_MS)
        assert again is not None
        assert again.lease.generation == 2

    @pytest.mark.rule("S-CLAIM.1", "S-PUT.6")
    async def test_a_retry_waits_then_claims_in_order(self, handles: StoreHandles) -> None:
        """A task retried with a delay is not claimable before retry_at (by id or not); the
        other tasks are taken in rules.claim_order instead; a retry of 0 is claimable at
        once."""
        store = await handles.open()
        first = await new_in_order(handles, store, WorkSpec("job", None, None, (0,)))
        second = await new_in_order(handles, store, WorkSpec("job", None, None, (60_000,)))
        third = await new_in_order(handles, store, WorkSpec("job"))
        for task in (second, first):
            got = await store.claim("w", lease_ms=LEASE_MS, task_id=task.task_id)
            assert got is not None
            await store.put_status(task.task_id, Retry(AGAIN), lease=got.lease)
        assert await store.claim("w", lease_ms=LEASE_MS, task_id=second.task_id) is None
        taken = [await store.claim("w", lease_ms=LEASE_MS) for _ in range(3)]
        due = sorted([first, third], key=rules.claim_order)
        assert [t.task_id for t in due] == [first.task_id, third.task_id]
        assert [t.record.task_id if t else None for t in taken] == [*(t.task_id for t in due), None]

    @pytest.mark.rule("S-CLAIM.1", "S-CLAIM.2")
    async def test_a_claim_that_ran_out_is_taken_again_in_claim_order(
        self, handles: StoreHandles
    ) -> None:
        """A task whose lease ran out (its worker died) waits for its claim's end
        (rules.claim_lane); the next claim without an id then finds it due and takes it, at
        the next generation, before a younger ready task."""
        store = await handles.open()
        first = await new_in_order(handles, store, WorkSpec("job"))
        second = await new_in_order(handles, store, WorkSpec("job"))
        dead = await store.claim("w1", lease_ms=SHORT_MS, task_id=first.task_id)
        assert dead is not None
        await handles.wait_past(dead.lease.expires_at)
        taken = await store.claim("w2", lease_ms=LEASE_MS)
        assert taken is not None
        assert taken.record.task_id == first.task_id
        assert taken.lease.generation == 2
        after = await store.claim("w3", lease_ms=LEASE_MS)
        assert after is not None
        assert after.record.task_id == second.task_id

    @pytest.mark.rule("S-PUT.2", "S-PUT.5", "S-PUT.6", "S-TTL.2")
    async def test_put_status_writes_what_apply_put_computes(self, handles: StoreHandles) -> None:
        """Every kind of change, with and without an event id, with a result retention that
        holds the ended task: the transition and the record equal rules.apply_put at the
        store's now; a replay of the event id is the rule's duplicate."""
        store = await handles.open(StoreOptions(result_retention_ms=7_200_000))
        work = WorkSpec("job", None, None, (500,))
        for change in CHANGES:
            for event_id in (None, "ev/é"):
                case = (change, event_id)
                before = await store.create(NewTask(new_task_id(), ttl_ms=60_000, work=work))
                await after_a_moment(handles, before)
                got = await store.put_status(before.task_id, change, event_id=event_id)
                now = write_now(before, got.record)
                want = apply_put_as_stored(
                    handles, before, change, now, result_retention_ms=7_200_000, event_id=event_id
                )
                assert got == want, case
                assert await store.get(before.task_id, ANY_OWNER) == want.record, case
                if event_id is not None:
                    again = await store.put_status(before.task_id, change, event_id=event_id)
                    replayed = apply_put_as_stored(
                        handles,
                        want.record,
                        change,
                        now + 1,
                        result_retention_ms=7_200_000,
                        event_id=event_id,
                    )
                    assert again == replayed, case

    @pytest.mark.rule("S-UPDATE.3", "S-UPDATE.4", "S-CANCEL.1", "S-CANCEL.3", "S-TTL.2")
    async def test_update_and_cancel_write_what_the_rules_compute(
        self, handles: StoreHandles
    ) -> None:
        """Answers to some, then all outstanding keys (payloads a server-side JSON round trip
        could change), then a cancel: each the rule's record (rules.apply_update,
        rules.apply_cancel) at the store's now, the cancelled task held for the result
        retention."""
        store = await handles.open(StoreOptions(result_retention_ms=600_000))
        task = await store.create(NewTask(new_task_id(), owner="alice", ttl_ms=LEASE_MS // 2))
        asked = await store.put_status(task.task_id, RequireInput({"a": ELICIT, "b": ELICIT}))
        steps: list[dict[str, object]] = [
            {"a": {"action": "accept", "content": AWKWARD}, "zzz": 1},
            {"b": {"action": "decline"}},
        ]
        before = asked.record
        for responses in steps:
            await after_a_moment(handles, before)
            got = await store.update(task.task_id, "alice", responses)
            now = write_now(before, got.record)
            assert got == rules.apply_update(before, "alice", responses, now)
            before = got.record
        await after_a_moment(handles, before)
        cancelled = await store.cancel(task.task_id, "alice")
        now = write_now(before, cancelled.record)
        assert cancelled == rules.apply_cancel(before, "alice", now, result_retention_ms=600_000)
        assert cancelled.record.expires_at == now + 600_000
        assert await store.get(task.task_id, "alice") == cancelled.record


def apply_put_as_stored(
    handles: StoreHandles, before: TaskRecord, change: StatusChange, now: int, **options: Any
) -> Transition:
    """rules.apply_put on what the store is given: with ``--contract-encrypted`` the sealed
    record and change (its event fingerprint is the sealed change's), the answer opened."""
    if handles.keys is None:
        return rules.apply_put(before, change, now, **options)
    seal = TaskSeal(handles.keys, before.task_id, before.owner)
    stored = rules.apply_put(reseal(before, handles.keys), seal.seal_change(change), now, **options)
    return replace(stored, record=seal.open_record(stored.record))
