"""S-CLOSE: ``close`` is idempotent, and a closed handle refuses all work."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from mcp_tasks import (
    ANY_OWNER,
    STORE_OPERATIONS,
    NewTask,
    Progress,
    StoreUnavailable,
    TaskNotFound,
    new_task_id,
)
from mcp_tasks_contract.suite.base import (
    LONG_LEASE_MS,
    ContractBase,
    assert_unchanged,
    current,
    job,
    new_task,
    outcome_of,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from mcp_tasks_contract.handles import StoreHandles


class CloseContract(ContractBase):
    """S-CLOSE."""

    @pytest.mark.rule("S-CLOSE", "INV-NOPARTIAL")
    async def test_a_closed_handle_refuses_every_operation(self, handles: StoreHandles) -> None:
        """After close (twice: it is idempotent) every other operation of the handle raises
        StoreUnavailable and writes nothing; another handle sees the tasks as they were."""
        store, other = await handles.open_many(2)
        record = await new_task(store, work=job())
        claimed = await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=record.task_id)
        assert claimed is not None
        lease, before = claimed.lease, await current(store, record.task_id)
        refused = NewTask(task_id=new_task_id())
        await store.close()
        await store.close()

        task_id = record.task_id
        calls: dict[str, Callable[[], Awaitable[Any]]] = {
            "create": lambda: store.create(refused),
            "get": lambda: store.get(task_id, ANY_OWNER),
            "update": lambda: store.update(task_id, None, {"k": {"v": 1}}),
            "cancel": lambda: store.cancel(task_id, None),
            "put_status": lambda: store.put_status(task_id, Progress("late"), lease=lease),
            "claim": lambda: store.claim("w2", lease_ms=LONG_LEASE_MS),
            "renew": lambda: store.renew(lease, lease_ms=LONG_LEASE_MS),
            "release": lambda: store.release(lease),
            "reap": store.reap,
        }
        assert set(calls) == set(STORE_OPERATIONS) - {"close"}
        outcomes = {name: await outcome_of(call) for name, call in calls.items()}
        not_refused = {
            name: outcome
            for name, outcome in outcomes.items()
            if not isinstance(outcome, StoreUnavailable)
        }
        assert not_refused == {}, "a closed handle must raise StoreUnavailable"
        await store.close()

        await assert_unchanged(other, before)
        with pytest.raises(TaskNotFound):
            await other.get(refused.task_id, ANY_OWNER)
