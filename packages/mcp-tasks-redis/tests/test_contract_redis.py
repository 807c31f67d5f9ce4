"""The Store contract against the Redis store: one key prefix (hash tag) per namespace on a
real server (the ``redis_url`` fixture of conftest.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from raw_keys import key_contents
from redis.asyncio import Redis

from mcp_tasks_contract import Offers, StatsContract, StoreContract, UrlStoreFactory

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable


class TestRedisStore(StoreContract, StatsContract):
    """Handles on one namespace are separate clients (connection pools) on the same prefix."""

    stateful_max_examples = 20
    # A key prefix per namespace, pub/sub; restarts are test_redis_server_restart.py's, on
    # a server of its own (this one is shared).
    offers = Offers(namespaces=True, notifier=True, rewrite=True, counts=True)

    @pytest.fixture
    async def store(self, redis_url: str) -> AsyncIterator[UrlStoreFactory]:
        async with UrlStoreFactory(redis_url) as stores:
            yield stores

    @pytest.fixture
    def store_contents(self, redis_url: str) -> Callable[[str], Awaitable[object]]:
        async def contents(namespace: str) -> object:
            return await prefix_contents(redis_url, namespace)

        return contents


async def prefix_contents(url: str, prefix: str) -> dict[bytes, tuple[object, int | bool]]:
    """:func:`key_contents` on a client of its own."""
    client = Redis.from_url(url)
    try:
        return await key_contents(client, prefix)
    finally:
        await client.aclose()
