"""With the default options one principal cannot take the whole table: its active tasks are
capped at a tenth of the row cap, so every other principal can still create."""

from __future__ import annotations

import pytest

from mcp_tasks import NewTask, StoreOptions
from mcp_tasks.domain.errors import TaskLimitReached
from mcp_tasks.domain.ids import new_task_id
from mcp_tasks.engine.errors import to_jsonrpc_error
from mcp_tasks.stores.memory import MemoryTaskStore

pytestmark = pytest.mark.anyio

GREEDY, OTHER = '["issuer","greedy","sub"]', '["issuer","other","sub"]'


def test_the_default_per_owner_cap_is_a_tenth_of_the_row_cap() -> None:
    """By default one owner may hold a tenth of the default row cap active (1,000 of
    10,000); with no row cap, no per-owner cap; one set explicitly is kept, ``None``
    included."""
    assert StoreOptions().max_rows == 10_000
    assert StoreOptions().max_active_per_owner == 1_000
    assert StoreOptions(max_rows=50_000).max_active_per_owner == 1_000
    assert StoreOptions(max_rows=None).max_active_per_owner is None
    assert StoreOptions(max_active_per_owner=None).max_active_per_owner is None
    assert StoreOptions(max_rows=None, max_active_per_owner=7).max_active_per_owner == 7


async def test_one_principal_is_refused_at_its_cap_while_another_still_creates() -> None:
    """One owner creating without end is refused (TaskLimitReached: -32603 "Task limit
    reached" on the wire) at ``max_active_per_owner`` active tasks, far below the row cap;
    another owner's create still succeeds, and a finished task makes room again."""
    store = MemoryTaskStore()  # the default options
    cap = StoreOptions().max_active_per_owner
    assert cap is not None
    first = None
    for _ in range(cap):
        record = await store.create(NewTask(new_task_id(), owner=GREEDY))
        first = first or record
    with pytest.raises(TaskLimitReached) as refused:
        await store.create(NewTask(new_task_id(), owner=GREEDY))
    wire = to_jsonrpc_error(refused.value).error
    assert (wire.code, wire.message) == (-32603, "Task limit reached")
    await store.create(NewTask(new_task_id(), owner=OTHER))
    assert first is not None
    await store.cancel(first.task_id, GREEDY)
    await store.create(NewTask(new_task_id(), owner=GREEDY))
