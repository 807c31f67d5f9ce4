"""S-PUT: worker writes (``put_status``)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from mcp_tasks import (
    Complete,
    DuplicateInputKeys,
    EventIdReused,
    Fail,
    InvalidInputRequests,
    InvalidTransition,
    Outcome,
    Progress,
    RequireInput,
    Retry,
    RevisionConflict,
    StaleLease,
    TaskNotFound,
    TaskStatus,
    new_task_id,
)
from mcp_tasks.domain.models import input_digest
from mcp_tasks_contract.suite.base import (
    BOOM,
    ELICIT,
    LONG_LEASE_MS,
    SHORT_MS,
    ContractBase,
    assert_unchanged,
    current,
    expiry,
    job,
    new_task,
)

if TYPE_CHECKING:
    from mcp_tasks.domain.jsonsafe import JSONObject
    from mcp_tasks_contract.handles import StoreHandles


class PutContract(ContractBase):
    """S-PUT.1-6 (the 32-writer race for S-PUT.3 is in the race tests)."""

    @pytest.mark.rule("S-PUT.1", "INV-REVISION", "INV-TIMES")
    async def test_leased_writes_apply_with_the_exact_live_lease(
        self, handles: StoreHandles
    ) -> None:
        """Each write with the current lease applies: revision + 1, last_updated_at later."""
        store = await handles.open()
        record = await new_task(store, work=job())
        claimed = await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=record.task_id)
        assert claimed is not None
        previous = await current(store, record.task_id)
        for step in range(1, 4):
            transition = await store.put_status(
                record.task_id, Progress(f"step {step}"), lease=claimed.lease
            )
            assert transition.outcome is Outcome.APPLIED
            assert transition.revision == step
            assert transition.record.revision == step
            assert transition.record.status_message == f"step {step}"
            assert transition.record.last_updated_at > previous.last_updated_at
            assert await current(store, record.task_id) == transition.record
            previous = transition.record

    @pytest.mark.rule("S-PUT.1", "INV-NOPARTIAL")
    async def test_write_with_a_wrong_token_or_generation_is_stale(
        self, handles: StoreHandles
    ) -> None:
        """A lease whose token or generation differs from the live claim raises StaleLease."""
        store = await handles.open()
        record = await new_task(store, work=job())
        claimed = await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=record.task_id)
        assert claimed is not None
        before = await current(store, record.task_id)
        forged = (
            replace(claimed.lease, token="not-the-token"),
            replace(claimed.lease, generation=claimed.lease.generation + 1),
            replace(claimed.lease, generation=claimed.lease.generation - 1),
        )
        for lease in forged:
            with pytest.raises(StaleLease):
                await store.put_status(record.task_id, Complete({"v": 1}), lease=lease)
        await assert_unchanged(store, before)

    @pytest.mark.rule("S-PUT.1", "INV-NOPARTIAL")
    async def test_write_with_an_expired_lease_is_stale(self, handles: StoreHandles) -> None:
        """Once the lease ran out by the store clock, a write with it raises StaleLease."""
        store = await handles.open()
        record = await new_task(store, work=job())
        claimed = await store.claim("w1", lease_ms=SHORT_MS, task_id=record.task_id)
        assert claimed is not None
        await handles.wait_past(claimed.lease.expires_at)
        before = await current(store, record.task_id)
        with pytest.raises(StaleLease):
            await store.put_status(record.task_id, Complete({"v": 1}), lease=claimed.lease)
        await assert_unchanged(store, before)

    @pytest.mark.rule("S-PUT.1", "INV-NOPARTIAL")
    async def test_unleased_write_waits_for_no_live_claim(self, handles: StoreHandles) -> None:
        """Manual-mode writes (no lease) raise StaleLease while another worker holds a live claim,
        and apply once the claim is released."""
        store = await handles.open()
        record = await new_task(store, work=job())
        claimed = await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=record.task_id)
        assert claimed is not None
        before = await current(store, record.task_id)
        with pytest.raises(StaleLease):
            await store.put_status(record.task_id, Progress("by id"))
        await assert_unchanged(store, before)
        await store.release(claimed.lease)
        transition = await store.put_status(record.task_id, Progress("by id"))
        assert transition.outcome is Outcome.APPLIED

    @pytest.mark.rule("S-PUT.1")
    async def test_unleased_write_drives_a_manual_task(self, handles: StoreHandles) -> None:
        """A task with no work (manual mode) is driven by id alone to completion."""
        store = await handles.open()
        record = await new_task(store, owner="alice")
        await store.put_status(record.task_id, Progress("half way"))
        done = await store.put_status(record.task_id, Complete({"content": []}, "Done"))
        assert done.outcome is Outcome.APPLIED
        seen = await store.get(record.task_id, "alice")
        assert (seen.status, seen.result, seen.status_message) == (
            TaskStatus.COMPLETED,
            {"content": []},
            "Done",
        )
        assert seen.revision == 2

    @pytest.mark.rule("S-PUT.1")
    async def test_write_to_a_missing_task_is_not_found(self, handles: StoreHandles) -> None:
        """put_status on an unknown or expired id raises TaskNotFound."""
        store = await handles.open()
        expired = await new_task(store, ttl_ms=SHORT_MS)
        await handles.wait_past(expiry(expired))
        for task_id in (new_task_id(), expired.task_id):
            with pytest.raises(TaskNotFound):
                await store.put_status(task_id, Progress("hello"))

    @pytest.mark.rule("S-PUT.2")
    async def test_replayed_event_is_a_duplicate(self, handles: StoreHandles) -> None:
        """The same event id and body answers duplicate: original revision, nothing written."""
        store = await handles.open()
        record = await new_task(store)
        first = await store.put_status(record.task_id, Progress("one"), event_id="ev-1")
        await store.put_status(record.task_id, Progress("two"), event_id="ev-2")
        latest = await current(store, record.task_id)
        replay = await store.put_status(record.task_id, Progress("one"), event_id="ev-1")
        assert replay.outcome is Outcome.DUPLICATE
        assert replay.revision == first.revision
        assert replay.record == latest
        await assert_unchanged(store, latest)

    @pytest.mark.rule("S-PUT.2", "INV-NOPARTIAL")
    async def test_event_id_with_another_body_is_refused(self, handles: StoreHandles) -> None:
        """Reusing an event id for a different change raises EventIdReused; nothing is written."""
        store = await handles.open()
        record = await new_task(store)
        await store.put_status(record.task_id, Progress("one"), event_id="ev-1")
        before = await current(store, record.task_id)
        with pytest.raises(EventIdReused):
            await store.put_status(record.task_id, Progress("other"), event_id="ev-1")
        with pytest.raises(EventIdReused):
            await store.put_status(record.task_id, Complete({"v": 1}), event_id="ev-1")
        await assert_unchanged(store, before)

    @pytest.mark.rule("S-PUT.2", "S-PUT.3", "S-PUT.4")
    async def test_event_id_is_checked_before_revision_and_finality(
        self, handles: StoreHandles
    ) -> None:
        """A replay with a stale expected_revision, after the task finished, is a duplicate."""
        store = await handles.open()
        record = await new_task(store)
        done = await store.put_status(
            record.task_id, Complete({"v": 1}), expected_revision=0, event_id="ev-done"
        )
        replay = await store.put_status(
            record.task_id, Complete({"v": 1}), expected_revision=0, event_id="ev-done"
        )
        assert replay.outcome is Outcome.DUPLICATE
        assert replay.revision == done.revision == 1
        await assert_unchanged(store, done.record)

    @pytest.mark.rule("S-PUT.3", "INV-NOPARTIAL")
    async def test_stale_expected_revision_conflicts(self, handles: StoreHandles) -> None:
        """A stale expected_revision raises RevisionConflict carrying the current record."""
        store = await handles.open()
        record = await new_task(store)
        moved = await store.put_status(record.task_id, Progress("moved"), expected_revision=0)
        assert moved.outcome is Outcome.APPLIED
        for stale in (0, 2, 99):
            with pytest.raises(RevisionConflict) as caught:
                await store.put_status(record.task_id, Complete({"v": 1}), expected_revision=stale)
            assert caught.value.current == moved.record
        await assert_unchanged(store, moved.record)
        ok = await store.put_status(record.task_id, Complete({"v": 1}), expected_revision=1)
        assert (ok.outcome, ok.revision) == (Outcome.APPLIED, 2)

    @pytest.mark.rule("S-PUT.4", "INV-TERMINAL")
    async def test_terminal_tasks_are_final(self, handles: StoreHandles) -> None:
        """Every change to a completed, failed or cancelled task is unchanged: a late result
        never resurrects a cancelled task."""
        store = await handles.open()
        completed = await new_task(store, owner="alice")
        failed = await new_task(store, owner="alice")
        cancelled = await new_task(store, owner="alice")
        await store.put_status(completed.task_id, Complete({"v": 1}))
        await store.put_status(failed.task_id, Fail(BOOM))
        await store.cancel(cancelled.task_id, "alice")
        changes = (
            Progress("late"),
            RequireInput({"late": ELICIT}),
            Complete({"v": 2}),
            Fail({"code": 1, "message": "late"}),
            Retry(BOOM),
        )
        for task in (completed, failed, cancelled):
            final = await current(store, task.task_id)
            for change in changes:
                transition = await store.put_status(task.task_id, change, event_id="late")
                assert transition.outcome is Outcome.UNCHANGED
                assert transition.record == final
            await assert_unchanged(store, final)
        seen = await current(store, cancelled.task_id)
        assert (seen.status, seen.result) == (TaskStatus.CANCELLED, None)

    @pytest.mark.rule("S-PUT.5")
    async def test_input_is_requested_only_while_working(self, handles: StoreHandles) -> None:
        """RequireInput moves working → input_required; from input_required it raises
        InvalidTransition and writes nothing."""
        store = await handles.open()
        record = await new_task(store)
        asked = await store.put_status(record.task_id, RequireInput({"a": ELICIT}, "Need a"))
        assert asked.outcome is Outcome.APPLIED
        assert asked.record.status is TaskStatus.INPUT_REQUIRED
        assert dict(asked.record.input_requests) == {"a": ELICIT}
        assert asked.record.status_message == "Need a"
        with pytest.raises(InvalidTransition):
            await store.put_status(record.task_id, RequireInput({"b": ELICIT}))
        await assert_unchanged(store, asked.record)

    @pytest.mark.rule("S-PUT.5", "INV-NOPARTIAL")
    async def test_input_keys_are_unique_over_the_task_life(self, handles: StoreHandles) -> None:
        """A key requested before (even answered long ago) raises DuplicateInputKeys."""
        store = await handles.open()
        record = await new_task(store, owner="alice")
        await store.put_status(record.task_id, RequireInput({"a": ELICIT}))
        await store.update(record.task_id, "alice", {"a": "yes"})
        before = await current(store, record.task_id)
        assert before.status is TaskStatus.WORKING
        with pytest.raises(DuplicateInputKeys) as caught:
            await store.put_status(record.task_id, RequireInput({"b": ELICIT, "a": ELICIT}))
        assert caught.value.keys == ("a",)
        await assert_unchanged(store, before)
        fresh = await store.put_status(record.task_id, RequireInput({"b": ELICIT}))
        assert fresh.outcome is Outcome.APPLIED

    @pytest.mark.rule("S-PUT.5", "INV-NOPARTIAL")
    async def test_empty_or_malformed_requests_are_refused(self, handles: StoreHandles) -> None:
        """Empty or malformed input requests raise InvalidInputRequests; nothing is written."""
        store = await handles.open()
        record = await new_task(store)
        malformed: list[object] = [
            {},
            {"a": {"method": "tools/call"}},
            {"a": {"method": "elicitation/create", "params": "not an object"}},
            {"": ELICIT},
            {"a": "not an object"},
            ["a"],
        ]
        for requests in malformed:
            with pytest.raises(InvalidInputRequests):
                await store.put_status(record.task_id, RequireInput(requests))  # type: ignore[arg-type]
        await assert_unchanged(store, record)

    @pytest.mark.rule("S-PUT.6")
    async def test_retry_schedules_the_next_attempt(self, handles: StoreHandles) -> None:
        """Retry sets retry_at = now + the next delay, counts the attempt and releases the claim;
        no claim is possible before retry_at."""
        store = await handles.open()
        record = await new_task(store, work=job(3_600_000, 0))
        claimed = await store.claim("w1", lease_ms=LONG_LEASE_MS)
        assert claimed is not None
        before = await handles.now()  # the store's clock, before the write
        retried = await store.put_status(
            record.task_id, Retry(BOOM, "Retrying"), lease=claimed.lease
        )
        assert retried.outcome is Outcome.APPLIED
        seen = await current(store, record.task_id)
        assert (seen.status, seen.attempt, seen.claim) == (TaskStatus.WORKING, 1, None)
        assert seen.retry_at is not None
        # The write's now lies between the clock read before it and its last_updated_at.
        assert before + 3_600_000 <= seen.retry_at <= seen.last_updated_at + 3_600_000
        assert seen.status_message == "Retrying"
        assert seen.generation == claimed.lease.generation
        assert await store.claim("w2", lease_ms=LONG_LEASE_MS) is None
        with pytest.raises(StaleLease):
            await store.put_status(record.task_id, Progress("x"), lease=claimed.lease)
        await assert_unchanged(store, seen)

    @pytest.mark.rule("S-PUT.6")
    async def test_retry_forgets_the_questions_it_left_unanswered(
        self, handles: StoreHandles
    ) -> None:
        """A retry drops the outstanding requests' keys from asked_inputs (answered keys stay):
        the next attempt may ask such a key again, with any request, and may not reuse an
        answered one."""
        store, other = await handles.open_many(2)
        record = await new_task(store, work=job(0, 0))
        first = await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=record.task_id)
        assert first is not None
        confirm: JSONObject = {"method": "elicitation/create", "params": {"message": "Sure?"}}
        lease = first.lease
        await store.put_status(record.task_id, RequireInput({"a": ELICIT}), lease=lease)
        await other.update(record.task_id, None, {"a": 1})
        await store.put_status(record.task_id, RequireInput({"b": confirm}), lease=lease)
        retried = await store.put_status(record.task_id, Retry(BOOM), lease=lease)
        assert retried.outcome is Outcome.APPLIED
        seen = await current(other, record.task_id)
        assert seen.input_requests == {}
        assert dict(seen.asked_inputs) == {"a": input_digest(ELICIT)}
        assert dict(retried.record.asked_inputs) == {"a": input_digest(ELICIT)}
        second = await other.claim("w2", lease_ms=LONG_LEASE_MS, task_id=record.task_id)
        assert second is not None
        with pytest.raises(DuplicateInputKeys):
            await other.put_status(record.task_id, RequireInput({"a": ELICIT}), lease=second.lease)
        asked = await other.put_status(
            record.task_id, RequireInput({"b": ELICIT}), lease=second.lease
        )
        assert asked.outcome is Outcome.APPLIED
        assert dict(asked.record.asked_inputs) == {
            "a": input_digest(ELICIT),
            "b": input_digest(ELICIT),
        }
        assert dict((await current(store, record.task_id)).input_requests) == {"b": ELICIT}

    @pytest.mark.rule("S-PUT.6")
    async def test_retry_with_no_delay_left_fails_the_task(self, handles: StoreHandles) -> None:
        """Each retry consumes one delay; with none left, Retry fails the task with its error."""
        store = await handles.open()
        record = await new_task(store, work=job(0))
        first = await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=record.task_id)
        assert first is not None
        await store.put_status(record.task_id, Retry(BOOM), lease=first.lease)
        second = await store.claim("w2", lease_ms=LONG_LEASE_MS, task_id=record.task_id)
        assert second is not None
        assert second.lease.generation == first.lease.generation + 1
        last = await store.put_status(record.task_id, Retry(BOOM), lease=second.lease)
        assert last.outcome is Outcome.APPLIED
        seen = await current(store, record.task_id)
        assert (seen.status, seen.error, seen.attempt) == (TaskStatus.FAILED, BOOM, 1)
        assert seen.status_message == "boom"

    @pytest.mark.rule("S-PUT.5")
    async def test_asked_inputs_keep_every_key_with_its_request_digest(
        self, handles: StoreHandles
    ) -> None:
        """Each requested key joins asked_inputs with input_digest of its request, and stays
        there through answers, later requests and completion, on every handle."""
        store, other = await handles.open_many(2)
        record = await new_task(store, owner="alice")
        confirm: JSONObject = {"method": "elicitation/create", "params": {"message": "Sure?"}}
        roots: JSONObject = {"method": "roots/list"}
        first = await store.put_status(record.task_id, RequireInput({"a": ELICIT, "b": confirm}))
        asked = {"a": input_digest(ELICIT), "b": input_digest(confirm)}
        assert asked["a"] != asked["b"]
        assert dict(first.record.asked_inputs) == asked
        assert dict((await current(other, record.task_id)).asked_inputs) == asked
        await other.update(record.task_id, "alice", {"a": 1, "b": 2})
        assert dict((await current(other, record.task_id)).asked_inputs) == asked
        await store.put_status(record.task_id, RequireInput({"c": roots}))
        asked["c"] = input_digest(roots)
        await other.update(record.task_id, "alice", {"c": []})
        done = await store.put_status(record.task_id, Complete({"v": 1}))
        assert dict(done.record.asked_inputs) == asked
        seen = await current(other, record.task_id)
        assert dict(seen.asked_inputs) == asked
        assert seen.used_input_keys == {"a", "b", "c"}
