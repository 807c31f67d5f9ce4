"""Task-changed signals between processes on one SQLite file: its data version.

SQLite has no message channel, but ``PRAGMA data_version`` changes on a connection
whenever another connection (any process) commits to the file. One watcher connection per
process reads it every :data:`WATCH_INTERVAL_S` while the file is being written. On Linux,
file events (inotify on the file's directory) say when that is: an idle watcher sleeps until
the file, its WAL or its journal is written, and reads the version once a
:data:`QUIET_CHECK_S` besides; elsewhere it reads every :data:`WATCH_INTERVAL_S` always.

The file does not say which task changed, so on a change the watcher reads the row versions
of the tasks this process's subscribers wait for, in one query on its own connection, and
wakes only the subscribers of tasks whose version moved (or whose row is gone). Waking every
subscriber instead would make each of them re-read its task through the store at every tick
while anything writes: with N tasks running here, N reads queued on the store's one
connection per tick. Nothing is sent: the write itself is the signal.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from contextlib import closing, contextmanager
from typing import TYPE_CHECKING

import aiosqlite
import anyio
import sqlalchemy as sa
from sqlalchemy.dialects.sqlite.aiosqlite import SQLiteDialect_aiosqlite

from mcp_tasks.runtime.notifier import RelayNotifier
from mcp_tasks_sql import task_tables
from mcp_tasks_sql.statements import compile_statement

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from pathlib import Path

    from mcp_tasks_sql import CompiledSQL, TaskTables

    #: What a notifier's subscribers wait for (``LocalNotifier.watched``).
    Watched = Callable[[], tuple[dict[str, str], bool]]

logger = logging.getLogger(__name__)

#: How often the watcher reads the file's data version while the file is being written
#: (one cheap PRAGMA, no disk I/O beyond the shared-memory index in WAL mode).
WATCH_INTERVAL_S = 0.025
#: How long after the file's last event the watcher goes on reading every interval: a
#: commit's last write to the WAL comes a moment before its update of the shared-memory
#: index, which raises no event, so a read at the event alone may still see the old version.
SETTLE_S = 0.25
#: How often an idle watcher with file events reads the data version all the same: a write
#: no event reports (a filesystem without inotify support) is heard late, never missed.
QUIET_CHECK_S = 1.0


class SQLiteRelay:
    """Watches one SQLite file for commits by any connection.

    With ``watching`` (the notifier's :meth:`~mcp_tasks.runtime.notifier.LocalNotifier.watched`,
    bound by :func:`relay_notifier`) and ``versions`` (:func:`row_versions` of the namespace's
    tables), a change wakes the subscribers of the tasks that changed; without them, or
    while a subscriber takes every task, every subscriber."""

    #: Every commit moves the data version, which the watcher reads at least every
    #: ``quiet_check_s``: no change goes unheard while it watches.
    complete = True

    def __init__(
        self,
        path: Path,
        interval_s: float = WATCH_INTERVAL_S,
        *,
        versions: CompiledSQL | None = None,
        watching: Watched | None = None,
        quiet_check_s: float = QUIET_CHECK_S,
    ) -> None:
        self.path = path
        self.interval_s = interval_s
        self.quiet_check_s = quiet_check_s
        self.versions = versions
        self.watching = watching

    def __repr__(self) -> str:
        return "SQLiteRelay()"

    async def send(self, key: str) -> None:
        return None  # the commit itself changed the data version every watcher reads

    async def receive(
        self, deliver: Callable[[str | None], None], ready: Callable[[], None]
    ) -> None:
        # The data version is read on the event loop itself, without waiting on a lock
        # (timeout=0): one PRAGMA of a few microseconds, where a trip to a connection's
        # thread and back, 40 times a second, would cost an idle process 1 % of a core.
        with (
            closing(sqlite3.connect(self.path, isolation_level=None, timeout=0)) as probe,
            FileEvents.of(self.path) as events,
        ):
            await self._watch(probe, events, deliver, ready)

    async def _watch(
        self,
        probe: sqlite3.Connection,
        events: FileEvents | None,
        deliver: Callable[[str | None], None],
        ready: Callable[[], None],
    ) -> None:
        connection = await aiosqlite.connect(self.path, isolation_level=None)
        last: dict[str, int] = {}  # signal key -> the row version last seen
        busy_until = 0.0  # until then, read every interval: the file is being written
        try:
            seen = _data_version(probe)
            ready()
            while True:
                if events is None or anyio.current_time() < busy_until:
                    await anyio.sleep(self.interval_s)
                else:
                    await events.wait(self.quiet_check_s)
                if events is not None and events.happened():
                    busy_until = anyio.current_time() + SETTLE_S
                version = _data_version(probe)
                if version is None:  # locked by a writer: busy
                    busy_until = anyio.current_time() + SETTLE_S
                    continue
                if version == seen:
                    continue
                seen = version
                busy_until = anyio.current_time() + SETTLE_S
                if self.watching is None or self.versions is None:
                    deliver(None)
                    continue
                watched, everything = self.watching()
                if everything:
                    deliver(None)
                    continue
                try:
                    moved = await _moved(connection, self.versions, watched, last)
                except sqlite3.OperationalError as error:
                    if not str(error).startswith("no such table"):
                        raise
                    # The file changed before the store created its tables (a new file
                    # switched to WAL): no row to compare, so wake every subscriber.
                    deliver(None)
                    continue
                for key in moved:
                    deliver(key)
        finally:
            # Shielded: this runs when the notifier stops (a cancellation), and an unclosed
            # connection's thread would outlive the event loop.
            with anyio.CancelScope(shield=True):
                await connection.close()

    async def aclose(self) -> None:
        return None


class FileEvents:
    """Linux inotify on the directory of a SQLite file: says when any process has written,
    created or removed the file, its WAL or its journal. The directory is watched, not the
    files, as the WAL comes and goes with the connections."""

    MASK = 0x2 | 0x100 | 0x200 | 0x80
    OVERFLOW = 0x4000  # IN_Q_OVERFLOW: events were dropped, so anything may have changed

    def __init__(self, path: Path) -> None:
        from inotify_simple import INotify  # noqa: PLC0415 (Linux only)

        self.names = {path.name, f"{path.name}-wal", f"{path.name}-journal"}
        self.inotify = INotify(nonblocking=True)
        try:
            self.inotify.add_watch(path.parent, self.MASK)
        except BaseException:
            self.inotify.close()
            raise

    @classmethod
    @contextmanager
    def of(cls, path: Path) -> Iterator[FileEvents | None]:
        """Events of the file at ``path``, or ``None`` where there are none (not Linux, or
        the user's inotify limits reached): the watcher then reads every interval."""
        try:
            events = cls(path)
        except (ImportError, OSError) as error:
            logger.debug("no file events for the SQLite change watcher (%s): polling", error)
            yield None
            return
        with closing(events.inotify):
            yield events

    async def wait(self, timeout_s: float) -> None:
        """Until an event is ready to read, or ``timeout_s`` has passed."""
        with anyio.move_on_after(timeout_s):
            await anyio.wait_readable(self.inotify.fileno())

    def happened(self) -> bool:
        """Whether the file was written since the last call (reads the queued events)."""
        return any(
            event.mask & self.OVERFLOW or event.name in self.names
            for event in self.inotify.read(timeout=0)
        )


async def _moved(
    connection: aiosqlite.Connection,
    statement: CompiledSQL,
    watched: Mapping[str, str],
    versions: dict[str, int],
) -> list[str]:
    """The signal keys of the ``watched`` tasks whose row version differs from the one in
    ``versions`` (updated in place): changed, gone, or not seen before (a subscriber that
    came since the last change may have read before it). A pseudo id such as the work
    signal has no row, so it is woken by every change, as claimable work may have come."""
    ids = json.dumps(list(watched.values()))
    async with connection.execute(statement.text, statement.args({"ids": ids})) as cursor:
        found = {str(row[0]): int(row[1]) for row in await cursor.fetchall()}
    current = {key: found[task_id] for key, task_id in watched.items() if task_id in found}
    moved = [key for key in watched if key not in current or versions.get(key) != current[key]]
    versions.clear()
    versions.update(current)
    return moved


def row_versions(tables: TaskTables) -> CompiledSQL:
    """The ids and row versions of the tasks a JSON array of ids names (``ids``): one
    parameter whatever the count."""
    c = tables.tasks.c
    value = sa.column("value", sa.Text)
    ids = sa.select(value).select_from(sa.func.json_each(sa.bindparam("ids", type_=sa.Text)))
    statement = sa.select(c.task_id, c.row_version).where(c.task_id.in_(ids))
    return compile_statement(statement, SQLiteDialect_aiosqlite())


def _data_version(connection: sqlite3.Connection) -> int | None:
    """The file's data version as ``connection`` sees it; ``None`` while another connection
    holds a lock that keeps it from reading (the next tick asks again)."""
    try:
        row = connection.execute("PRAGMA data_version").fetchone()
    except sqlite3.OperationalError as error:
        if "locked" in str(error) or "busy" in str(error):
            return None
        raise
    return int(row[0]) if row is not None else 0


def relay_notifier(path: Path, table_prefix: str) -> RelayNotifier:
    """A data-version watcher on the file ``path`` and its tables of ``table_prefix``
    (what the SQLite store offers as its notifier)."""
    tables = task_tables(prefix=table_prefix)
    relay = SQLiteRelay(path, versions=row_versions(tables))
    relayed = RelayNotifier(relay)
    relay.watching = relayed.watched
    return relayed
