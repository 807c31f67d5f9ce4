"""``stats``' count of work no running process has claimed lately (``waiting_unclaimed``):
claimable tasks created ``rules.UNCLAIMED_AFTER_MS`` or more ago. The SQL and MongoDB
stores restate the rule on their servers; their predicate checks compare it with the rule."""

from __future__ import annotations

import pytest

from mcp_tasks import ManualClock, MemoryTaskStore, NewTask, WorkSpec, new_task_id
from mcp_tasks.domain.rules import UNCLAIMED_AFTER_MS

pytestmark = pytest.mark.anyio


async def test_a_task_of_a_tool_nobody_claims_is_counted_once_it_waited() -> None:
    """A task of a tool no claim asks for counts once it is UNCLAIMED_AFTER_MS old, not
    before; claimed, it no longer counts; handed back, it counts again."""
    clock = ManualClock()
    store = MemoryTaskStore(clock=clock)
    record = await store.create(NewTask(new_task_id(), work=WorkSpec("alpha")))
    assert await store.claim("w", lease_ms=1_000, work_types=frozenset({"beta"})) is None
    clock.advance(UNCLAIMED_AFTER_MS - 1)
    assert (await store.stats()).waiting_unclaimed == 0
    clock.advance(1)
    assert (await store.stats()).waiting_unclaimed == 1
    claimed = await store.claim("w", lease_ms=1_000, work_types=frozenset({"alpha"}))
    assert claimed is not None
    assert claimed.record.task_id == record.task_id
    assert (await store.stats()).waiting_unclaimed == 0
    await store.release(claimed.lease)
    assert (await store.stats()).waiting_unclaimed == 1
