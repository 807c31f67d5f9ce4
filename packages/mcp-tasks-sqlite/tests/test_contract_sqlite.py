"""The Store contract against the SQLite store: one real database file per namespace."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks_contract import StoreContract, StoreFactory
from mcp_tasks_sqlite import SQLiteTaskStore

if TYPE_CHECKING:
    from pathlib import Path

    from mcp_tasks import Store, StoreOptions


class TestSQLiteStore(StoreContract):
    """Handles on one namespace are separate connections to the same file."""

    stateful_max_examples = 20  # each example opens files and fsyncs every write

    @pytest.fixture
    def store(self, tmp_path: Path) -> StoreFactory:
        async def open_store(namespace: str, options: StoreOptions) -> Store:
            return SQLiteTaskStore(tmp_path / f"{namespace}.db", options)

        return open_store  # pytest's tmp_path removes the files
