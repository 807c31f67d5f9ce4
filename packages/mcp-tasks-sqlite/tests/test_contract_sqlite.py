"""The Store contract against the SQLite store: one real database file per namespace, on a
manual clock (the store's injectable clock, ``offers.clock``): the suite moves time by
advancing it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks_contract import Offers, StoreContract, StoreFactory
from mcp_tasks_sqlite import SQLiteTaskStore

if TYPE_CHECKING:
    from pathlib import Path

    from mcp_tasks import Store, StoreOptions
    from mcp_tasks.domain.clock import ManualClock


class TestSQLiteStore(StoreContract):
    """Handles on one namespace are separate connections to the same file."""

    stateful_max_examples = 20  # each example opens files and fsyncs every write
    # A table prefix per namespace, a notifier on the file's data version; a file has no
    # server to restart.
    offers = Offers(clock=True, namespaces=True, notifier=True)

    @pytest.fixture
    def store(self, tmp_path: Path, store_clock: ManualClock) -> StoreFactory:
        async def open_store(namespace: str, options: StoreOptions) -> Store:
            return SQLiteTaskStore(tmp_path / f"{namespace}.db", options, clock=store_clock)

        return open_store  # pytest's tmp_path removes the files
