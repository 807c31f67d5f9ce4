"""The Store contract against the MongoDB store: one collection prefix per namespace on a
real server (the ``mongodb_url`` fixture of conftest.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from pymongo import AsyncMongoClient

from mcp_tasks_contract import Offers, StatsContract, StoreContract, UrlStoreFactory

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable


class TestMongoStore(StoreContract, StatsContract):
    """Handles on one namespace are separate clients (connection pools) on the same prefix."""

    stateful_max_examples = 20
    # A collection prefix per namespace, a signals collection; the server is shared.
    offers = Offers(namespaces=True, notifier=True, rewrite=True, counts=True)

    @pytest.fixture
    async def store(self, mongodb_store_url: str) -> AsyncIterator[UrlStoreFactory]:
        # The contract's subject is not the store's bound: on the slow embedded server a
        # longer one (mongodb_store_url says why).
        async with UrlStoreFactory(mongodb_store_url) as stores:
            yield stores

    @pytest.fixture
    def store_contents(self, mongodb_url: str) -> Callable[[str], Awaitable[object]]:
        async def contents(namespace: str) -> object:
            return await prefix_contents(mongodb_url, namespace)

        return contents


async def prefix_contents(url: str, prefix: str) -> dict[str, object]:
    """Every collection of the prefix with its indexes and documents (write versions
    included), on a client of its own."""
    client: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(url)
    try:
        db = client.get_default_database("mcp_tasks")
        names = sorted(n for n in await db.list_collection_names() if n.startswith(prefix + "_"))
        contents: dict[str, object] = {}
        for name in names:
            indexes = [index async for index in await db[name].list_indexes()]
            documents = await db[name].find({}).sort("_id", 1).to_list()
            contents[name] = (sorted(map(repr, indexes)), documents)
        return contents
    finally:
        await client.close()
