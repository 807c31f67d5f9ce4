"""The Store contract against the Postgres store: one schema per namespace on a real server
(the ``postgres_url`` fixture of conftest.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks.stores.opening import with_query
from mcp_tasks_contract import Offers, StoreContract, UrlStoreFactory

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


class TestPostgresStore(StoreContract):
    """Handles on one namespace are separate connection pools on the same schema."""

    stateful_max_examples = 20
    # A schema per namespace, LISTEN/NOTIFY; restarts are test_postgres_server_restart.py's,
    # on a server of its own (this one is shared).
    offers = Offers(namespaces=True, notifier=True)

    @pytest.fixture
    async def store(self, postgres_url: str) -> AsyncIterator[UrlStoreFactory]:
        # One connection per handle: races open dozens of handles on a shared server.
        async with UrlStoreFactory(with_query(postgres_url, max_connections="1")) as stores:
            yield stores
