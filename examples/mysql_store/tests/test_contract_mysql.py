"""The whole Store contract against the MariaDB / MySQL store: a table prefix per namespace
in the server's database (the ``mysql_url`` fixture of conftest.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks.stores.opening import with_query
from mcp_tasks_contract import Offers, StoreContract, UrlStoreFactory

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


class TestMySQLStore(StoreContract):
    """Handles on one namespace are separate connection pools on the same tables."""

    offers = Offers(namespaces=True)  # no injectable clock, no notifier (polling)
    stateful_max_examples = 20

    @pytest.fixture
    async def store(self, mysql_url: str) -> AsyncIterator[UrlStoreFactory]:
        # One connection per handle: races open dozens of handles on one server.
        async with UrlStoreFactory(with_query(mysql_url, max_connections="1")) as stores:
            yield stores
