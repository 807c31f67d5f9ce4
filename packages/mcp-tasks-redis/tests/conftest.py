"""Fixtures for the Redis store's own tests: a real server (``redis_url``: the
environment's ``MCP_TASKS_TEST_REDIS_URL``; see :mod:`mcp_tasks_contract.servers`) and a
fresh key prefix per test, dropped afterwards."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks import StoreOptions, drop_namespace, namespaced_url
from mcp_tasks_contract import new_namespace
from mcp_tasks_contract.servers import redis_url
from mcp_tasks_redis import RedisTaskStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    OpenStore = Callable[..., Awaitable[RedisTaskStore]]

__all__ = ["redis_url"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def namespace() -> str:
    return new_namespace()


@pytest.fixture
async def open_store(redis_url: str, namespace: str) -> AsyncIterator[OpenStore]:
    """Opens new handles (each its own client) on this test's prefix; drops it afterwards."""
    opened: list[RedisTaskStore] = []

    async def open_store(options: StoreOptions | None = None, **kwargs: object) -> RedisTaskStore:
        store = RedisTaskStore(redis_url, options or StoreOptions(), prefix=namespace, **kwargs)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        await store.close()
    await drop_namespace(namespaced_url(redis_url, namespace))
