"""The Store contract against the MongoDB store: one collection prefix per namespace on a
real server (the ``mongodb_url`` fixture of conftest.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks_contract import Offers, StoreContract, UrlStoreFactory

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


class TestMongoStore(StoreContract):
    """Handles on one namespace are separate clients (connection pools) on the same prefix."""

    stateful_max_examples = 20
    # A collection prefix per namespace, a signals collection; the server is shared.
    offers = Offers(namespaces=True, notifier=True)

    @pytest.fixture
    async def store(self, mongodb_url: str) -> AsyncIterator[UrlStoreFactory]:
        async with UrlStoreFactory(mongodb_url) as stores:
            yield stores
