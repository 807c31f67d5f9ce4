"""Who chooses the store: an app pins one (Tasks(store=…)) or leaves it to whoever runs it."""

from __future__ import annotations

import pytest

from mcp_tasks import MemoryTaskStore, NewTask, StorePinned, Tasks, new_task_id
from mcp_tasks.domain.rules import ANY_OWNER
from mcp_tasks.stores.observed import ObservedStore
from mcp_tasks.stores.opening import URL_ENV

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _no_store_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(URL_ENV, raising=False)


async def test_an_unpinned_tasks_serves_from_the_store_handed_to_it() -> None:
    """``Tasks()`` then ``use_store(url)``: the runner, the engine and the facade all use the
    new store, which Tasks now owns (closes) and counts as pinned."""
    tasks = Tasks()
    assert not tasks.store_pinned
    tasks.use_store("memory://handoff")
    assert tasks.store_pinned
    assert tasks.close_store
    # The runner and the engine observe the store they use (each operation a span).
    assert isinstance(tasks.runner.store, ObservedStore)
    assert isinstance(tasks.engine.store, ObservedStore)
    assert tasks.store is tasks.runner.store.inner is tasks.engine.store.inner
    # One observed store, the same for the engine, the runner and control().
    assert tasks.runner.store is tasks.engine.store is tasks.observed_store
    assert tasks.control().store is tasks.observed_store
    assert tasks.store_description == "memory://handoff"
    created = await tasks.store.create(NewTask(task_id=new_task_id()))
    assert await tasks.engine.store.get(created.task_id, ANY_OWNER) == created


async def test_a_store_object_handed_over_stays_the_callers() -> None:
    """A Store object handed over is not closed by Tasks (close_store as in the constructor)."""
    tasks = Tasks()
    handed = MemoryTaskStore()
    tasks.use_store(handed)
    assert tasks.store is handed
    assert not tasks.close_store


@pytest.mark.parametrize("pinned", ["memory://pinned", MemoryTaskStore()])
def test_a_pinned_store_cannot_be_replaced(pinned: str | MemoryTaskStore) -> None:
    """An app that chose its store keeps it; the error names the store it pinned."""
    tasks = Tasks(store=pinned)
    before = tasks.store
    with pytest.raises(StorePinned, match="The app pins its task store to memory://"):
        tasks.use_store("memory://other")
    assert tasks.store is before


async def test_no_store_is_handed_over_while_running() -> None:
    """Swapping stores under running tasks would split them: refused once running."""
    tasks = Tasks()
    async with tasks.running():
        with pytest.raises(RuntimeError, match="before the Tasks starts running"):
            tasks.use_store("memory://late")
    assert not tasks.store_pinned


def test_an_unpinned_tasks_reads_the_store_url_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With $MCP_TASKS_STORE_URL set, ``Tasks()`` opens (and owns) that store, and whoever
    runs the app may still hand it another."""
    monkeypatch.setenv(URL_ENV, "memory://from-env")
    tasks = Tasks()
    assert tasks.store_description == "memory://from-env"
    assert tasks.close_store
    assert not tasks.store_pinned
