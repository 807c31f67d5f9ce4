"""S-UPDATE: answering input requests (``tasks/update``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks import (
    ANY_OWNER,
    Complete,
    NotJSONSafe,
    Outcome,
    RequireInput,
    Store,
    TaskNotFound,
    TaskRecord,
    TaskStatus,
    new_task_id,
)
from mcp_tasks_contract.suite.base import (
    ELICIT,
    SHORT_MS,
    ContractBase,
    assert_unchanged,
    current,
    expiry,
    new_task,
)

if TYPE_CHECKING:
    from mcp_tasks_contract.handles import StoreHandles


async def waiting_for(store: Store, *keys: str, owner: str | None = "alice") -> TaskRecord:
    """A task in input_required with one outstanding request per key."""
    record = await new_task(store, owner=owner)
    change = RequireInput({key: ELICIT for key in keys})
    return (await store.put_status(record.task_id, change)).record


class UpdateContract(ContractBase):
    """S-UPDATE.1-5 (the race for S-UPDATE.5 is in the race tests)."""

    @pytest.mark.rule("S-UPDATE.1")
    async def test_update_is_owner_bound(self, handles: StoreHandles) -> None:
        """A foreign owner, an anonymous caller and an unknown id get TaskNotFound; no write."""
        store = await handles.open()
        record = await waiting_for(store, "a")
        for task_id, caller in (
            (record.task_id, "mallory"),
            (record.task_id, None),
            (new_task_id(), "alice"),
        ):
            with pytest.raises(TaskNotFound):
                await store.update(task_id, caller, {"a": "yes"})
        await assert_unchanged(store, record)

    @pytest.mark.rule("S-UPDATE.1", "INV-EXPIRED")
    async def test_update_of_an_expired_task_is_not_found(self, handles: StoreHandles) -> None:
        """Once its TTL passed, a task answers update like a missing one (not unchanged)."""
        store = await handles.open()
        record = await new_task(store, owner="alice", ttl_ms=SHORT_MS)
        await handles.wait_past(expiry(record))
        with pytest.raises(TaskNotFound):
            await store.update(record.task_id, "alice", {"a": "yes"})
        with pytest.raises(TaskNotFound):
            await store.update(record.task_id, ANY_OWNER, {"a": "yes"})

    @pytest.mark.rule("S-UPDATE.2")
    async def test_keys_not_outstanding_are_ignored(self, handles: StoreHandles) -> None:
        """Answers only to unknown keys change nothing: outcome unchanged, record as before."""
        store = await handles.open()
        record = await waiting_for(store, "a")
        transition = await store.update(record.task_id, "alice", {"zzz": 1, "other": "x"})
        assert transition.outcome is Outcome.UNCHANGED
        assert transition.revision == record.revision
        await assert_unchanged(store, record)

    @pytest.mark.rule("S-UPDATE.2")
    async def test_update_of_a_working_task_is_unchanged(self, handles: StoreHandles) -> None:
        """With nothing outstanding (a working task), update is acknowledged and writes nothing."""
        store = await handles.open()
        record = await new_task(store, owner="alice")
        transition = await store.update(record.task_id, "alice", {"a": "yes"})
        assert transition.outcome is Outcome.UNCHANGED
        await assert_unchanged(store, record)

    @pytest.mark.rule("S-UPDATE.3")
    async def test_partial_answer_keeps_waiting_for_the_rest(self, handles: StoreHandles) -> None:
        """Answering some keys keeps input_required; the next get shows only what is still open."""
        store, other = await handles.open_many(2)
        record = await waiting_for(store, "a", "b", "c")
        transition = await store.update(
            record.task_id, "alice", {"a": 1, "c": {"ok": True}, "x": 0}
        )
        assert transition.outcome is Outcome.APPLIED
        assert transition.revision == record.revision + 1
        seen = await other.get(record.task_id, "alice")
        assert seen.status is TaskStatus.INPUT_REQUIRED
        assert dict(seen.input_requests) == {"b": ELICIT}
        assert dict(seen.input_responses) == {"a": 1, "c": {"ok": True}}
        assert seen.revision == record.revision + 1
        assert seen.last_updated_at > record.last_updated_at

    @pytest.mark.rule("S-UPDATE.4")
    async def test_last_answer_resumes_work_and_keeps_the_responses(
        self, handles: StoreHandles
    ) -> None:
        """Answering the last open key moves the task to working; every response is kept."""
        store = await handles.open()
        record = await waiting_for(store, "a", "b")
        await store.update(record.task_id, "alice", {"a": "first"})
        transition = await store.update(record.task_id, "alice", {"b": ["second"], "a": "again"})
        assert transition.outcome is Outcome.APPLIED
        seen = await current(store, record.task_id)
        assert seen.status is TaskStatus.WORKING
        assert dict(seen.input_requests) == {}
        assert dict(seen.input_responses) == {"a": "first", "b": ["second"]}
        assert seen.revision == record.revision + 2

    @pytest.mark.rule("S-UPDATE.5", "S-PUT.4")
    async def test_update_after_completion_changes_nothing(self, handles: StoreHandles) -> None:
        """A late answer to a completed task is unchanged; the result stays."""
        store = await handles.open()
        record = await waiting_for(store, "a")
        done = await store.put_status(record.task_id, Complete({"ok": 1}))
        transition = await store.update(record.task_id, "alice", {"a": "late"})
        assert transition.outcome is Outcome.UNCHANGED
        await assert_unchanged(store, done.record)

    @pytest.mark.rule("S-JSON", "INV-NOPARTIAL")
    async def test_non_json_response_is_rejected_and_nothing_written(
        self, handles: StoreHandles
    ) -> None:
        """A response that is not JSON-safe raises NotJSONSafe; no key is answered."""
        store = await handles.open()
        record = await waiting_for(store, "a", "b")
        with pytest.raises(NotJSONSafe):
            await store.update(record.task_id, "alice", {"a": "fine", "b": float("nan")})
        await assert_unchanged(store, record)
