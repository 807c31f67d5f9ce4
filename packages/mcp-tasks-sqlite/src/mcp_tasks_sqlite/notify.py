"""Task-changed signals between processes on one SQLite file: its data version.

SQLite has no message channel, but ``PRAGMA data_version`` changes on a connection
whenever another connection (any process) commits to the file. One watcher connection per
process reads it every :data:`WATCH_INTERVAL_S`; a change wakes every local subscriber
("something changed": the file does not say which task), and each re-reads what it
watches. Nothing is sent: the write itself is the signal.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import aiosqlite
import anyio

from mcp_tasks.runtime.notifier import RelayNotifier

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

logger = logging.getLogger(__name__)

#: How often the watcher reads the file's data version (one cheap PRAGMA, no disk I/O
#: beyond the shared-memory index in WAL mode).
WATCH_INTERVAL_S = 0.025


class SQLiteRelay:
    """Watches one SQLite file for commits by any connection."""

    def __init__(self, path: Path, interval_s: float = WATCH_INTERVAL_S) -> None:
        self.path = path
        self.interval_s = interval_s

    def __repr__(self) -> str:
        return "SQLiteRelay()"

    async def send(self, key: str) -> None:
        return None  # the commit itself changed the data version every watcher reads

    async def receive(
        self, deliver: Callable[[str | None], None], ready: Callable[[], None]
    ) -> None:
        connection = await aiosqlite.connect(self.path, isolation_level=None)
        try:
            seen = await _data_version(connection)
            ready()
            while True:
                await anyio.sleep(self.interval_s)
                version = await _data_version(connection)
                if version != seen:
                    seen = version
                    deliver(None)
        finally:
            # Shielded: this runs when the notifier stops (a cancellation), and an unclosed
            # connection's thread would outlive the event loop.
            with anyio.CancelScope(shield=True):
                await connection.close()

    async def aclose(self) -> None:
        return None


async def _data_version(connection: aiosqlite.Connection) -> int:
    async with connection.execute("PRAGMA data_version") as cursor:
        row = await cursor.fetchone()
    return int(row[0]) if row is not None else 0


def notifier(store: object) -> RelayNotifier | None:
    """The ``mcp_tasks.notifiers`` entry point: a data-version watcher for a store on a
    :class:`~mcp_tasks_sqlite.SQLiteDialect` (also one wrapped by a delegating proxy);
    ``None`` for anything else."""
    from mcp_tasks_sqlite.store import SQLiteDialect  # noqa: PLC0415 (store imports much)

    dialect = getattr(store, "dialect", None)
    if not isinstance(dialect, SQLiteDialect):
        return None
    return RelayNotifier(SQLiteRelay(dialect.path))
