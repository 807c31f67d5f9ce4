"""Who closes the store: Tasks closes what it built from a URL, never what it was handed."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks import MemoryTaskStore, NewTask, StoreUnavailable, TaskNotFound, Tasks
from mcp_tasks.cli.demo_tools import demo_server
from mcp_tasks.domain.rules import ANY_OWNER

if TYPE_CHECKING:
    from mcp_tasks.stores.protocol import Store

pytestmark = pytest.mark.anyio


async def _is_open(store: Store) -> bool:
    """A closed store answers every call StoreUnavailable; an open one looks the id up."""
    try:
        await store.get("no-such-task", ANY_OWNER)
    except TaskNotFound:
        return True
    except StoreUnavailable:
        return False
    raise AssertionError("an unknown id was found")


async def test_a_store_built_from_a_url_is_closed_when_the_lifespan_ends() -> None:
    """``Tasks(store="memory://")`` owns the store it built: the outermost exit closes it."""
    tasks = Tasks(store="memory://")
    assert tasks.close_store
    async with tasks.running():
        assert await _is_open(tasks.store)
    assert not await _is_open(tasks.store)


async def test_a_store_passed_in_stays_open_after_the_lifespan() -> None:
    """A store the caller passed is the caller's: Tasks leaves it open, and it can run the
    lifespan again."""
    store = MemoryTaskStore()
    tasks = Tasks(store=store)
    assert not tasks.close_store
    async with tasks.running():
        pass
    async with tasks.running():
        assert await _is_open(store)
    assert await _is_open(store)


async def test_the_default_memory_store_survives_repeated_lifespans() -> None:
    """``Tasks()``'s private memory store holds no connections and is not closed, so the
    lifespan can run more than once (FastMCP enters it once per in-memory client)."""
    tasks = Tasks()
    async with tasks.running():
        pass
    async with tasks.running():
        assert await _is_open(tasks.store)


async def test_close_store_closes_a_passed_store_only_at_the_outermost_exit() -> None:
    """``close_store=True`` hands a passed store to Tasks; a nested ``running()`` (the same
    lifespan composed at two levels) does not close it early."""
    store = MemoryTaskStore()
    tasks = Tasks(store=store, close_store=True)
    async with tasks.running():
        async with tasks.lifespan(None):
            pass
        assert await _is_open(store)
    assert not await _is_open(store)


async def test_close_store_false_keeps_a_url_built_store_open() -> None:
    """``close_store=False`` overrides the default for a store built from a URL."""
    tasks = Tasks(store="memory://", close_store=False)
    async with tasks.running():
        pass
    assert await _is_open(tasks.store)


async def test_the_demo_server_closes_the_store_it_is_given() -> None:
    """The demo server owns its store: its lifespan closes it at shutdown."""
    store = MemoryTaskStore()
    server = demo_server(store, log_level="WARNING")
    lifespan = server.settings.lifespan
    assert lifespan is not None
    async with lifespan(server):
        record = await store.create(NewTask(task_id="demo-probe"))
        assert (await store.get(record.task_id, ANY_OWNER)).task_id == "demo-probe"
    assert not await _is_open(store)
