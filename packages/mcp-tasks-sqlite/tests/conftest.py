"""Fixtures for the SQLite store's own tests: a real file per test."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks.domain.models import StoreOptions
from mcp_tasks_sqlite import SQLiteTaskStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable
    from pathlib import Path

    OpenStore = Callable[..., Awaitable[SQLiteTaskStore]]


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "tasks.db"


@pytest.fixture
async def open_store(db_path: Path) -> AsyncIterator[OpenStore]:
    """Opens new handles (each its own connection) on this test's database file."""
    opened: list[SQLiteTaskStore] = []

    async def open_store(options: StoreOptions | None = None, **kwargs: object) -> SQLiteTaskStore:
        store = SQLiteTaskStore(db_path, options or StoreOptions(), **kwargs)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        await store.close()
