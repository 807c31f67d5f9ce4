"""Fixtures for the Redis store's own tests: a real server (``redis_url``: the
environment's ``MCP_TASKS_TEST_REDIS_URL``; see :mod:`mcp_tasks_redis.provision`) and a
fresh key prefix per test, dropped afterwards."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from mcp_tasks_contract import UrlStoreFactory
from mcp_tasks_redis import RedisTaskStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from mcp_tasks import StoreOptions

    OpenStore = Callable[..., Awaitable[RedisTaskStore]]


@pytest.fixture
async def open_store(redis_url: str, namespace: str) -> AsyncIterator[OpenStore]:
    """Opens new handles (each its own client; keyword arguments go to RedisTaskStore)
    on this test's prefix; closes them and drops the prefix afterwards."""
    async with UrlStoreFactory(redis_url) as stores:
        stores.namespace_url(namespace)  # dropped at the end

        async def open_store(options: StoreOptions | None = None, **kwargs: Any) -> RedisTaskStore:
            return stores.keep(RedisTaskStore(redis_url, options, prefix=namespace, **kwargs))

        yield open_store
