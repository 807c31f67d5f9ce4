"""The Store contract against the Postgres store: one schema per namespace on a real server."""

from __future__ import annotations

from typing import TYPE_CHECKING

import asyncpg
import pytest

from mcp_tasks import StoreUnavailable
from mcp_tasks_contract import StoreContract, StoreFactory
from mcp_tasks_contract.servers import postgres_url
from mcp_tasks_postgres import PostgresTaskStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mcp_tasks import Store, StoreOptions

__all__ = ["postgres_url"]


class TestPostgresStore(StoreContract):
    """Handles on one namespace are separate connection pools on the same schema."""

    stateful_max_examples = 20

    @pytest.fixture
    async def store(self, postgres_url: str) -> AsyncIterator[StoreFactory]:
        schemas: set[str] = set()
        opened: list[Store] = []

        async def open_store(namespace: str, options: StoreOptions) -> Store:
            schemas.add(namespace)
            # One connection per handle: races open dozens of handles on a shared server.
            handle = PostgresTaskStore(postgres_url, options, schema=namespace, max_connections=1)
            opened.append(handle)
            return handle

        yield open_store
        # The suite closes every handle it opened (a closed handle refuses work).
        for handle in opened:
            with pytest.raises(StoreUnavailable):
                await handle.reap()
        conn = await asyncpg.connect(postgres_url)
        try:
            for schema in schemas:
                await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        finally:
            await conn.close()
