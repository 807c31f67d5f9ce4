"""The Store contract against the SQLite store: one real database file per namespace, on a
manual clock (the store's injectable clock, ``offers.clock``): the suite moves time by
advancing it."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import TYPE_CHECKING

import pytest

from mcp_tasks_contract import Offers, StatsContract, StoreContract, StoreFactory
from mcp_tasks_sqlite import SQLiteTaskStore

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from mcp_tasks import Store, StoreOptions
    from mcp_tasks.domain.clock import ManualClock


class TestSQLiteStore(StoreContract, StatsContract):
    """Handles on one namespace are separate connections to the same file."""

    stateful_max_examples = 20  # each example opens files and fsyncs every write
    # A table prefix per namespace, a notifier on the file's data version; a file has no
    # server to restart.
    offers = Offers(clock=True, namespaces=True, notifier=True, rewrite=True, counts=True)

    @pytest.fixture
    def store(self, tmp_path: Path, store_clock: ManualClock) -> StoreFactory:
        async def open_store(namespace: str, options: StoreOptions) -> Store:
            return SQLiteTaskStore(tmp_path / f"{namespace}.db", options, clock=store_clock)

        return open_store  # pytest's tmp_path removes the files

    @pytest.fixture
    def store_contents(self, tmp_path: Path) -> Callable[[str], Awaitable[object]]:
        async def contents(namespace: str) -> object:
            return file_contents(tmp_path / f"{namespace}.db")

        return contents


def file_contents(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table of the file (row versions included), on a connection of
    its own: what a write anywhere would change."""
    with closing(sqlite3.connect(path)) as conn:
        schema = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
        tables = [name for kind, name, _ in schema if kind == "table"]
        rows = {
            t: sorted(conn.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr) for t in tables
        }
        return {"schema": schema, **rows}
