"""Fixtures for the Postgres store's own tests: a real server (``postgres_url``: the
environment's, else an embedded one; see :mod:`mcp_tasks_contract.servers`) and a fresh
schema per test, dropped afterwards."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks import StoreOptions, drop_namespace, namespaced_url
from mcp_tasks_contract import new_namespace
from mcp_tasks_contract.servers import postgres_url
from mcp_tasks_postgres import PostgresTaskStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    OpenStore = Callable[..., Awaitable[PostgresTaskStore]]

__all__ = ["postgres_url"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def namespace() -> str:
    return new_namespace()


@pytest.fixture
async def open_store(postgres_url: str, namespace: str) -> AsyncIterator[OpenStore]:
    """Opens new handles (each its own pool) on this test's schema; drops it afterwards."""
    opened: list[PostgresTaskStore] = []

    async def open_store(
        options: StoreOptions | None = None, **kwargs: object
    ) -> PostgresTaskStore:
        store = PostgresTaskStore(
            postgres_url, options or StoreOptions(), schema=namespace, **kwargs
        )
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        await store.close()
    await drop_namespace(namespaced_url(postgres_url, namespace))
