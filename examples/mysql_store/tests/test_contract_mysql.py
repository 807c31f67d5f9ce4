"""The whole Store contract against the MariaDB / MySQL store: a table prefix per namespace
in the server's database (the ``mysql_url`` fixture of conftest.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest
from conftest import connect

from mcp_tasks.stores.opening import with_query
from mcp_tasks_contract import Offers, StatsContract, StoreContract, UrlStoreFactory

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable


class TestMySQLStore(StoreContract, StatsContract):
    """Handles on one namespace are separate connection pools on the same tables."""

    offers = Offers(
        namespaces=True, rewrite=True, counts=True
    )  # no injectable clock, no notifier (polling)
    stateful_max_examples = 20

    @pytest.fixture
    async def store(self, mysql_url: str) -> AsyncIterator[UrlStoreFactory]:
        # One connection per handle: races open dozens of handles on one server.
        async with UrlStoreFactory(with_query(mysql_url, max_connections="1")) as stores:
            yield stores

    @pytest.fixture
    def store_contents(self, mysql_url: str) -> Callable[[str], Awaitable[object]]:
        async def contents(namespace: str) -> object:
            return await anyio.to_thread.run_sync(
                tables_contents, mysql_url, f"{namespace.lower()}_"
            )

        return contents


def tables_contents(url: str, prefix: str) -> dict[str, object]:
    """Every table and index named with ``prefix`` and every row of those tables (row
    versions included), on a connection of its own: what a write anywhere would change."""
    with connect(url) as conn, conn.cursor() as cursor:
        cursor.execute(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = DATABASE() AND LEFT(table_name, %s) = %s ORDER BY table_name",
            (len(prefix), prefix),
        )
        tables = [row[0] for row in cursor.fetchall()]
        contents: dict[str, object] = {}
        for table in tables:
            cursor.execute(f"SHOW INDEX FROM `{table}`")
            indexes = sorted((row[2], row[4]) for row in cursor.fetchall())
            cursor.execute(f"SELECT * FROM `{table}`")
            contents[table] = (indexes, sorted(map(tuple, cursor.fetchall()), key=repr))
        return contents
