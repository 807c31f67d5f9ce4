"""Fixtures for the Postgres store's own tests: a real server, a fresh schema per handle factory."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

import asyncpg
import pytest

from mcp_tasks.domain.models import StoreOptions
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
    return "mcpt_" + secrets.token_hex(6)


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
    conn = await asyncpg.connect(postgres_url)
    try:
        await conn.execute(f"DROP SCHEMA IF EXISTS {namespace} CASCADE")
    finally:
        await conn.close()
