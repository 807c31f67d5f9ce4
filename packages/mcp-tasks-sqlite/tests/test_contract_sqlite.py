"""The Store contract against the SQLite store: one real database file per namespace, on a
manual clock (the store's injectable clock): the suite moves time by advancing it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks.domain.clock import ManualClock
from mcp_tasks_contract import StoreContract, StoreFactory
from mcp_tasks_sqlite import SQLiteTaskStore

if TYPE_CHECKING:
    from pathlib import Path

    from mcp_tasks import Store, StoreOptions


class TestSQLiteStore(StoreContract):
    """Handles on one namespace are separate connections to the same file."""

    stateful_max_examples = 20  # each example opens files and fsyncs every write

    @pytest.fixture
    def store_clock(self) -> ManualClock:
        return ManualClock()

    @pytest.fixture
    def store(self, tmp_path: Path, store_clock: ManualClock) -> StoreFactory:
        async def open_store(namespace: str, options: StoreOptions) -> Store:
            return SQLiteTaskStore(tmp_path / f"{namespace}.db", options, clock=store_clock)

        return open_store  # pytest's tmp_path removes the files
