"""The SQLite dialect of the shared SQL store: one SQLite file, safe for several processes.

Why the SQLite specifics: WAL lets readers run beside the one writer; every write runs in
``BEGIN IMMEDIATE``, which takes the write lock before the first read (a deferred
transaction that reads then writes fails with SQLITE_BUSY under concurrency, whatever the
busy timeout), and the busy timeout makes other connections and processes wait for it.
"""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote, unquote, urlsplit

import anyio
import sqlalchemy as sa
from sqlalchemy.dialects.sqlite.aiosqlite import SQLiteDialect_aiosqlite

from mcp_tasks.domain.clock import Clock, system_clock
from mcp_tasks.domain.errors import StoreUnavailable
from mcp_tasks.domain.models import StoreOptions
from mcp_tasks.stores.kit import CloseGuard, DriverErrors
from mcp_tasks.stores.location import StoreLocation, with_query
from mcp_tasks_sql import (
    Mode,
    SQLTaskStore,
    column_upgrades,
    schema_objects,
    schema_row,
    task_tables,
)
from mcp_tasks_sql import counts as sql_counts
from mcp_tasks_sql import statements as sql_statements
from mcp_tasks_sqlite.notify import relay_notifier
from mcp_tasks_sqlite.provision import SQLiteTestServers
from mcp_tasks_sqlite.store_time import StoreTime
from mcp_tasks_sqlite.thread import ConnectionThread

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from mcp_tasks.domain.models import NewTask, TaskRecord
    from mcp_tasks.runtime.notifier import RelayNotifier
    from mcp_tasks.stores.doctor_rows import DiagnosisRow
    from mcp_tasks_sql import CompiledSQL, Row, Statements, Transaction

DRIVER_ERRORS: tuple[type[BaseException], ...] = (sqlite3.Error, OSError)
UNAVAILABLE = DriverErrors(*DRIVER_ERRORS)
DEFAULT_BUSY_TIMEOUT_S = 30.0
PREFIX_PARAM = "table_prefix"

R = TypeVar("R")


class _StoreNow:
    """The ``now`` parameter's value until a statement runs: the store's time is read on
    the connection's thread, once its connection has established it (``StoreTime``)."""


STORE_NOW: Any = _StoreNow()


def _shown(path: str, table_prefix: str) -> str:
    """The URL that opens the store in file ``path`` (absolute) with ``table_prefix``."""
    return with_query("sqlite:///" + quote(path), **{PREFIX_PARAM: table_prefix or None})


class SQLiteDialect:
    """A :class:`~mcp_tasks_sql.SQLDialect` on one SQLite file and table prefix.

    Two sqlite3 connections per dialect, each on a thread of its own (opened on first use):
    one for the writes, one for the single-statement reads (``get``). Each operation, a
    whole transaction included, is one function run on its connection's thread, so writes
    take turns on theirs; reads, in WAL mode, never wait for a write to finish (a poll
    queued behind a burst of creates and their fsyncs would). Dialects and processes on the
    same file coordinate through SQLite's locks.

    The store's clock is the file's (:class:`~mcp_tasks_sqlite.store_time.StoreTime`), one
    every process on the file agrees on, unless a ``clock`` is given (tests).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Clock | None = None,
        table_prefix: str = "",
        busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
    ) -> None:
        if str(path) in ("", ":memory:"):
            raise ValueError(
                "SQLiteTaskStore needs a file path; use memory:// for a store in memory"
            )
        # Resolved now: a relative path names a file in the directory the store was opened
        # in, not wherever the process is when it first connects.
        self.path = Path(os.path.abspath(path))
        self.table_prefix = table_prefix
        self.store_time = StoreTime(f"{table_prefix}store_clock")
        if clock is None or clock is system_clock:  # the default: the file's time
            clock = self.store_time
        self._clock: Clock = clock
        self._busy_timeout_s = busy_timeout_s
        self._tables = task_tables(prefix=table_prefix)
        self._dialect = SQLiteDialect_aiosqlite()
        now = sa.bindparam("now", type_=sa.BigInteger)
        self._statements = sql_statements.build(
            self._tables,
            self._dialect,
            now,
            **sql_counts.counted_statements(self._tables, self._dialect, now),
        )
        self._reads: ConnectionThread | None = None
        self._writes: ConnectionThread | None = None
        self._guard = CloseGuard()

    @property
    def url(self) -> str:
        return _shown(str(self.path), self.table_prefix)

    @property
    def statements(self) -> Statements:
        return self._statements

    def with_now(self, values: dict[str, Any]) -> dict[str, Any]:
        values["now"] = STORE_NOW  # read when the statement runs (``_bind``)
        return values

    async def create(self, task: NewTask, options: StoreOptions) -> TaskRecord | None:
        return None  # the shared transaction is already one lock, one fsync and one hop

    async def _run(self, mode: Mode, work: Callable[[sqlite3.Connection], R]) -> R:
        """``work`` in one call on a connection's thread: alone on the reading connection
        for :attr:`Mode.READ` (one statement, its own snapshot: it sees every write
        committed before it began), else on the writing connection in a ``BEGIN IMMEDIATE``
        transaction that commits when ``work`` returns and rolls back when it raises (one
        COMMIT for the writes queued together: ``ConnectionThread.transact``). Driver
        failures (including a file locked beyond the busy timeout) raise
        StoreUnavailable."""
        self._guard.check()
        with UNAVAILABLE:
            if mode is Mode.READ:
                if self._reads is None:
                    self._reads = self._connection_thread("reads")
                return await self._reads.run(work)
            if self._writes is None:
                self._writes = self._connection_thread("writes")
            return await self._writes.transact(work)  # perhaps committed with writes beside it

    def _connection_thread(self, role: str) -> ConnectionThread:
        opener = partial(_open, self.path, self._busy_timeout_s, self.store_time)
        return ConnectionThread(opener, name=f"mcp-tasks-sqlite {role} {self.path.name}")

    async def transact(self, mode: Mode, body: Transaction[R]) -> R:
        """The whole of ``body`` in one hop to the connection's thread."""
        return await self._run(mode, partial(_run_statements, body, self._clock))

    async def fetch_one(self, sql: CompiledSQL, values: Mapping[str, Any]) -> Row | None:
        """One statement in its own snapshot, one hop to the connection's thread (``get``)."""
        args = sql.args(values)
        return await self._run(
            Mode.READ, lambda conn: _first_row(sql.text, _bind(args, self._clock), conn)
        )

    async def migrate(self) -> bool:
        return await self._run(Mode.TRANSACTION, self._migrate)

    def _migrate(self, conn: sqlite3.Connection) -> bool:
        found = conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?",
            (self._tables.tasks.name,),
        ).fetchall()
        created = not found[0][0]
        counted = conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?",
            (self._tables.counts.name,),
        ).fetchall()[0][0]
        ddl = sql_statements.ddl(self._tables, self._dialect)
        ddl += sql_counts.sqlite_triggers(self._tables, self._dialect)
        if not counted:  # the counts of the tasks written before, in this transaction
            ddl += sql_counts.refill_counts(self._tables, self._dialect)
        if not created:  # an older table: its added columns before the indexes on them
            tasks = self._tables.tasks.name
            present = {row[1] for row in conn.execute(f"PRAGMA table_info({tasks!r})")}
            work_type = sa.func.json_extract(self._tables.tasks.c.payload, "$.work.type")
            upgrades = column_upgrades(self._tables, self._dialect, present, work_type)
            ddl = upgrades + ddl
        for statement in ddl:
            conn.execute(statement)
        init = self._statements.init_counter
        conn.execute(init.text, init.args({}))
        return created

    async def diagnose(self) -> list[DiagnosisRow]:
        """The SQLite library, the journal and sync modes of this store's connection, and
        the table prefix's schema."""
        return await self._run(Mode.READ, self._diagnose)

    def _diagnose(self, conn: sqlite3.Connection) -> list[DiagnosisRow]:
        names = schema_objects(self._tables)
        (version,), *_ = conn.execute("SELECT sqlite_version()").fetchall()
        (journal,), *_ = conn.execute("PRAGMA journal_mode").fetchall()
        (synchronous,), *_ = conn.execute("PRAGMA synchronous").fetchall()
        marks = ", ".join("?" for _ in names)
        found = conn.execute(
            f"SELECT name FROM sqlite_master WHERE name IN ({marks})",  # noqa: S608 - marks
            names,
        ).fetchall()
        present = {row[0] for row in found}
        counted = None
        if self._tables.counter.name in present:
            counter = self._statements.counted_rows
            row = _first_row(counter.text, counter.args({}), conn)
            counted = None if row is None else int(row["n_rows"])
        missing = [name for name in names if name not in present]
        where = f"table prefix {self.table_prefix!r}" if self.table_prefix else "no table prefix"
        return [
            ("sqlite", "ok", f"SQLite library {version}, file {self.path}"),
            _journal_row(str(journal), int(synchronous)),
            schema_row(where, missing, counted),
        ]

    async def drop(self) -> None:
        """Drop this prefix's tables (and with them their indexes and every task)."""
        await self._run(Mode.TRANSACTION, self._drop)

    def _drop(self, conn: sqlite3.Connection) -> None:
        for table in reversed(self._tables.metadata.sorted_tables):
            drop = sa.schema.DropTable(table, if_exists=True)
            conn.execute(str(drop.compile(dialect=self._dialect)))
        conn.execute(f'DROP TABLE IF EXISTS "{self.store_time.table}"')

    async def close(self) -> None:
        """Let the operations already begun finish, then close the connections. Idempotent."""
        self._guard.close()
        threads = [t for t in (self._writes, self._reads) if t is not None]
        self._writes = self._reads = None
        failed: BaseException | None = None
        for thread in threads:  # every one stopped, even when one fails to close
            try:
                await thread.stop()
            except DRIVER_ERRORS as exc:
                failed = exc
        if failed is not None:
            raise StoreUnavailable from failed


def _run_statements(body: Transaction[R], clock: Clock, conn: sqlite3.Connection) -> R:
    """Run ``body``'s statements on ``conn`` (on its thread), sending each its answer."""
    try:
        statement = next(body)
        while True:
            sql = statement.sql
            args = _bind(sql.args(statement.values), clock)
            if statement.fetch:
                answer: Any = _first_row(sql.text, args, conn)
            else:
                answer = conn.execute(sql.text, args).rowcount
            statement = body.send(answer)
    except StopIteration as done:
        result: R = done.value
        return result
    finally:
        body.close()


def _bind(args: tuple[Any, ...], clock: Clock) -> tuple[Any, ...]:
    """``args`` with the store's now read once for the statement (every use of ``now`` in
    it, and the ``now_ms`` it answers, is that one instant)."""
    if not any(arg is STORE_NOW for arg in args):
        return args
    now = clock()
    return tuple(now if arg is STORE_NOW else arg for arg in args)


def _first_row(text: str, args: tuple[Any, ...], conn: sqlite3.Connection) -> Row | None:
    # fetchall, not fetchone: the statement runs to its end and is reset, so a read outside
    # a transaction keeps no snapshot open.
    rows: list[sqlite3.Row] = conn.execute(text, args).fetchall()
    return rows[0] if rows else None


def _open(path: Path, busy_timeout_s: float, store_time: StoreTime) -> sqlite3.Connection:
    """The store's connection to ``path`` (runs on the connection's thread), the file's
    store time established (outside any transaction, so a write rolled back cannot undo
    it)."""
    # isolation_level=None: the driver never opens transactions behind our back, so every
    # write transaction is our own BEGIN IMMEDIATE.
    conn = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None)
    try:
        conn.row_factory = sqlite3.Row
        _switch_to_wal(conn, busy_timeout_s)
        # FULL: an acknowledged write survives power loss too, not only a crash.
        conn.execute("PRAGMA synchronous=FULL")
        store_time.establish(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _switch_to_wal(conn: sqlite3.Connection, timeout_s: float) -> None:
    """``PRAGMA journal_mode=WAL``, retried for up to ``timeout_s`` while the file is busy.

    On a file still in rollback mode (a new one), the switch reads the header and then
    upgrades to a write lock; SQLite refuses that upgrade with SQLITE_BUSY at once, never
    calling the busy handler (two upgraders would deadlock), so handles opening a new file
    together failed while one of them switched it. Once the file is WAL, the pragma only
    reads. (This waits on the connection's thread, not on the event loop.)
    """
    deadline = time.monotonic() + timeout_s
    delay = 0.001
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL").fetchall()
            return
        except sqlite3.OperationalError as exc:
            busy = exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY
            if not busy or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(2 * delay, 0.05)


#: PRAGMA synchronous's values.
_SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def _journal_row(journal: str, synchronous: int) -> DiagnosisRow:
    """WAL with synchronous FULL (or EXTRA) is what the store sets: anything else warns."""
    sync = _SYNCHRONOUS.get(synchronous, str(synchronous))
    detail = f"journal_mode {journal}, synchronous {sync}"
    if journal != "wal":
        return ("journal", "warn", f"{detail}: not WAL, so readers wait for the writer")
    if synchronous < 2:
        return ("journal", "warn", f"{detail}: a power loss can lose acknowledged writes")
    return ("journal", "ok", f"{detail}: an acknowledged write survives a crash and a power loss")


class SQLiteTaskStore(SQLTaskStore):
    """A :class:`~mcp_tasks.stores.protocol.Store` in one SQLite file (a real file:
    ``:memory:`` is not shared between connections, use ``memory://`` for that).

    ``table_prefix`` is the namespace: several stores can share one file.
    """

    dialect: SQLiteDialect

    def __init__(
        self,
        path: str | Path,
        options: StoreOptions | None = None,
        *,
        clock: Clock | None = None,
        table_prefix: str = "",
        busy_timeout_s: float | None = None,
        location: StoreLocation | None = None,
    ) -> None:
        options = options or StoreOptions()
        # How long a write waits for another connection's lock: the store's bound unless
        # given here.
        busy = options.timeout_ms / 1000 if busy_timeout_s is None else busy_timeout_s
        dialect = SQLiteDialect(path, clock=clock, table_prefix=table_prefix, busy_timeout_s=busy)
        super().__init__(dialect, options, location=location)

    @property
    def path(self) -> Path:
        return self.dialect.path

    def offer_notifier(self) -> RelayNotifier:
        """A watcher of the file's data version: it hears every process on the file."""
        return relay_notifier(self.dialect.path, self.dialect.table_prefix)


@dataclass(frozen=True, kw_only=True, repr=False)
class SQLiteLocation(StoreLocation):
    """A ``sqlite:///`` URL read: the file and the table prefix (the namespace)."""

    path: str
    table_prefix: str


class SQLiteStoreBackend(SQLiteTestServers):
    """Opens ``sqlite:///relative/tasks.db`` and ``sqlite:////absolute/tasks.db``
    (SQLAlchemy's form); ``?table_prefix=NAME_`` picks the namespace within the file,
    ``?timeout_ms=`` the store's bound on waiting (``StoreOptions.timeout_ms``)."""

    def locate(self, url: str, /) -> SQLiteLocation:
        location = StoreLocation.read(url)
        parts = urlsplit(url)
        if location.scheme != "sqlite" or parts.netloc or len(parts.path) < 2:
            raise ValueError("A SQLite store URL looks like sqlite:///path/to/tasks.db")
        prefix = location.value(PREFIX_PARAM) or ""
        if not all(c.isascii() and (c.isalnum() or c == "_") for c in prefix):
            raise ValueError(f"{PREFIX_PARAM} is letters, digits and '_'")
        # The third slash separates the empty host. Resolved now: a relative path names a
        # file in the directory the URL was read in.
        path = os.path.abspath(unquote(parts.path)[1:])
        return location.specialised(
            SQLiteLocation,
            namespace=prefix,
            masked=_shown(path, prefix),
            path=path,
            table_prefix=prefix,
        )

    def open(self, location: SQLiteLocation, options: StoreOptions, /) -> SQLiteTaskStore:
        return SQLiteTaskStore(
            location.path, options, table_prefix=location.table_prefix, location=location
        )

    def namespaced(self, location: SQLiteLocation, namespace: str, /) -> SQLiteLocation:
        return self.locate(with_query(location.url, **{PREFIX_PARAM: f"{namespace}_"}))

    async def drop(self, location: SQLiteLocation, /) -> None:
        if not await anyio.Path(location.path).exists():
            return  # nothing to drop; opening would create the file
        dialect = SQLiteDialect(location.path, table_prefix=location.table_prefix)
        try:
            await dialect.drop()
        finally:
            await dialect.close()


def from_url(url: str, options: StoreOptions | None = None) -> SQLiteTaskStore:
    """The store ``url`` names (see :class:`SQLiteStoreBackend`)."""
    location = backend.locate(url)
    return backend.open(location, location.options(options))


#: The ``sqlite`` entry point of the ``mcp_tasks.stores`` group.
backend = SQLiteStoreBackend()
