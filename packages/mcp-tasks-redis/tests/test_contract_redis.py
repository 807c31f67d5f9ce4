"""The Store contract against the Redis store: one key prefix (hash tag) per namespace on a
real server (the ``redis_url`` fixture of conftest.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks import drop_namespace, namespaced_url
from mcp_tasks_contract import StoreContract, StoreFactory
from mcp_tasks_redis import RedisTaskStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mcp_tasks import Store, StoreOptions


class TestRedisStore(StoreContract):
    """Handles on one namespace are separate clients (connection pools) on the same prefix."""

    stateful_max_examples = 20

    @pytest.fixture
    async def store(self, redis_url: str) -> AsyncIterator[StoreFactory]:
        prefixes: set[str] = set()

        async def open_store(namespace: str, options: StoreOptions) -> Store:
            prefixes.add(namespace)
            return RedisTaskStore(redis_url, options, prefix=namespace)

        yield open_store
        for prefix in prefixes:
            await drop_namespace(namespaced_url(redis_url, prefix))
