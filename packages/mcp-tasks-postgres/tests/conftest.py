"""Fixtures for the Postgres store's own tests: a real server (``postgres_url``: the
environment's, else an embedded one; see :mod:`mcp_tasks_postgres.provision`) and a fresh
schema per test, dropped afterwards."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from mcp_tasks_contract import UrlStoreFactory
from mcp_tasks_postgres import PostgresTaskStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from mcp_tasks import StoreOptions

    OpenStore = Callable[..., Awaitable[PostgresTaskStore]]


@pytest.fixture
async def open_store(postgres_url: str, namespace: str) -> AsyncIterator[OpenStore]:
    """Opens new handles (each its own pool; keyword arguments go to PostgresTaskStore)
    on this test's schema; closes them and drops the schema afterwards."""
    async with UrlStoreFactory(postgres_url) as stores:
        stores.namespace_url(namespace)  # dropped at the end

        async def open_store(
            options: StoreOptions | None = None, **kwargs: Any
        ) -> PostgresTaskStore:
            return stores.keep(PostgresTaskStore(postgres_url, options, schema=namespace, **kwargs))

        yield open_store
