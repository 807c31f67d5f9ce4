"""S-GET: reading a task."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks import ANY_OWNER, TaskNotFound, new_task_id
from mcp_tasks_contract.suite.base import SHORT_MS, ContractBase, expiry, new_task

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from mcp_tasks_contract.handles import StoreHandles


async def _not_found_message(call: Awaitable[object]) -> str:
    """The text of the TaskNotFound a call raises (the same text must come every time)."""
    with pytest.raises(TaskNotFound) as caught:
        await call
    return str(caught.value)


class GetContract(ContractBase):
    """S-GET.1-3."""

    @pytest.mark.rule("S-GET.1", "INV-FOREIGN", "INV-EXPIRED")
    async def test_unknown_foreign_and_expired_are_one_error(self, handles: StoreHandles) -> None:
        """Unknown id, another owner's task and an expired task raise the same TaskNotFound."""
        store = await handles.open()
        owned = await new_task(store, owner="alice")
        expired = await new_task(store, owner="alice", ttl_ms=SHORT_MS)
        await handles.wait_past(expiry(expired))
        unknown = await _not_found_message(store.get(new_task_id(), "alice"))
        foreign = await _not_found_message(store.get(owned.task_id, "mallory"))
        anonymous = await _not_found_message(store.get(owned.task_id, None))
        gone = await _not_found_message(store.get(expired.task_id, "alice"))
        trusted_gone = await _not_found_message(store.get(expired.task_id, ANY_OWNER))
        assert unknown == foreign == anonymous == gone == trusted_gone
        assert owned.task_id not in unknown + foreign + gone

    @pytest.mark.rule("S-GET.2")
    async def test_ownerless_task_answers_any_caller(self, handles: StoreHandles) -> None:
        """A task created with owner None is readable by every principal and by ANY_OWNER."""
        store = await handles.open()
        record = await new_task(store, owner=None)
        for caller in (None, "alice", "bob", ANY_OWNER):
            assert await store.get(record.task_id, caller) == record

    @pytest.mark.rule("S-GET.2")
    async def test_trusted_reader_sees_an_owned_task(self, handles: StoreHandles) -> None:
        """ANY_OWNER (server-side callers) reads an owned task; its owner does too."""
        store = await handles.open()
        record = await new_task(store, owner="alice")
        assert await store.get(record.task_id, ANY_OWNER) == record
        assert await store.get(record.task_id, "alice") == record

    @pytest.mark.rule("S-GET.3")
    async def test_get_never_changes_the_record(self, handles: StoreHandles) -> None:
        """Reading many times, from several handles, leaves revision and last_updated_at alone."""
        first, second = await handles.open_many(2)
        record = await new_task(first, owner="alice")
        for _ in range(5):
            assert await first.get(record.task_id, "alice") == record
            assert await second.get(record.task_id, "alice") == record
        with pytest.raises(TaskNotFound):
            await second.get(record.task_id, "mallory")
        assert await first.get(record.task_id, ANY_OWNER) == record
