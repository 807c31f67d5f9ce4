"""The Store contract against the MongoDB store: one collection prefix per namespace on a
real server (the ``mongodb_url`` fixture of conftest.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks import drop_namespace, namespaced_url
from mcp_tasks_contract import StoreContract, StoreFactory
from mcp_tasks_mongodb import MongoTaskStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mcp_tasks import Store, StoreOptions


class TestMongoStore(StoreContract):
    """Handles on one namespace are separate clients (connection pools) on the same prefix."""

    stateful_max_examples = 20

    @pytest.fixture
    async def store(self, mongodb_url: str) -> AsyncIterator[StoreFactory]:
        prefixes: set[str] = set()

        async def open_store(namespace: str, options: StoreOptions) -> Store:
            prefixes.add(namespace)
            return MongoTaskStore(mongodb_url, options, prefix=namespace)

        yield open_store
        for prefix in prefixes:
            await drop_namespace(namespaced_url(mongodb_url, prefix))
