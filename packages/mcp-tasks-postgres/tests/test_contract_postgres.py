"""The Store contract against the Postgres store: one schema per namespace on a real server
(the ``postgres_url`` fixture of conftest.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks import drop_namespace, namespaced_url
from mcp_tasks_contract import StoreContract, StoreFactory
from mcp_tasks_postgres import PostgresTaskStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mcp_tasks import Store, StoreOptions


class TestPostgresStore(StoreContract):
    """Handles on one namespace are separate connection pools on the same schema."""

    stateful_max_examples = 20

    @pytest.fixture
    async def store(self, postgres_url: str) -> AsyncIterator[StoreFactory]:
        schemas: set[str] = set()

        async def open_store(namespace: str, options: StoreOptions) -> Store:
            schemas.add(namespace)
            # One connection per handle: races open dozens of handles on a shared server.
            return PostgresTaskStore(postgres_url, options, schema=namespace, max_connections=1)

        yield open_store
        for schema in schemas:
            await drop_namespace(namespaced_url(postgres_url, schema))
