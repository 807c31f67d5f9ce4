"""The Store contract against the Postgres store: one schema per namespace on a real server
(the ``postgres_url`` fixture of conftest.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import asyncpg
import pytest

from mcp_tasks.stores.opening import with_query
from mcp_tasks_contract import Offers, StatsContract, StoreContract, UrlStoreFactory

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable


class TestPostgresStore(StoreContract, StatsContract):
    """Handles on one namespace are separate connection pools on the same schema."""

    stateful_max_examples = 20
    # A schema per namespace, LISTEN/NOTIFY; restarts are test_postgres_server_restart.py's,
    # on a server of its own (this one is shared).
    offers = Offers(namespaces=True, notifier=True, rewrite=True, counts=True)

    @pytest.fixture
    async def store(self, postgres_url: str) -> AsyncIterator[UrlStoreFactory]:
        # One connection per handle: races open dozens of handles on a shared server.
        async with UrlStoreFactory(with_query(postgres_url, max_connections="1")) as stores:
            yield stores

    @pytest.fixture
    def store_contents(self, postgres_url: str) -> Callable[[str], Awaitable[object]]:
        async def contents(namespace: str) -> object:
            return await schema_contents(postgres_url, namespace)

        return contents


async def schema_contents(url: str, schema: str) -> dict[str, object]:
    """Every table and index of the schema and every row of its tables (row versions
    included), on a connection of its own."""
    conn = await asyncpg.connect(url)
    try:
        objects = await conn.fetch(
            "SELECT relname, relkind::text AS relkind FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 ORDER BY relname",
            schema,
        )
        tables = [row["relname"] for row in objects if row["relkind"] == "r"]
        rows = {
            table: sorted(
                (tuple(row) for row in await conn.fetch(f'SELECT * FROM "{schema}"."{table}"')),
                key=repr,
            )
            for table in tables
        }
        return {"objects": [tuple(row) for row in objects], **rows}
    finally:
        await conn.close()
