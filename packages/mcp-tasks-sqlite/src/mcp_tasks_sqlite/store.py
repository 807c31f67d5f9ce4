"""The SQLite dialect of the shared SQL store: one SQLite file, safe for several processes.

Why the SQLite specifics: WAL lets readers run beside the one writer; every write runs in
``BEGIN IMMEDIATE``, which takes the write lock before the first read (a deferred
transaction that reads then writes fails with SQLITE_BUSY under concurrency, whatever the
busy timeout), and the busy timeout makes other connections and processes wait for it.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import quote, unquote, urlsplit

import aiosqlite
import anyio
import sqlalchemy as sa
from sqlalchemy.dialects.sqlite.aiosqlite import SQLiteDialect_aiosqlite

from mcp_tasks.domain.clock import Clock, system_clock
from mcp_tasks.domain.errors import StoreUnavailable
from mcp_tasks.stores.opening import query_value, with_query
from mcp_tasks_sql import (
    Mode,
    SQLTaskStore,
    driver_errors_as_unavailable,
    schema_objects,
    schema_row,
    task_tables,
)
from mcp_tasks_sql import statements as sql_statements

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    from mcp_tasks.domain.models import NewTask, StoreOptions, TaskRecord
    from mcp_tasks.stores.diagnosis import DiagnosisRow
    from mcp_tasks_sql import CompiledSQL, Row, Statements

DRIVER_ERRORS: tuple[type[BaseException], ...] = (sqlite3.Error, OSError)
DEFAULT_BUSY_TIMEOUT_S = 30.0
PREFIX_PARAM = "table_prefix"


class _Connection:
    """The shared :class:`~mcp_tasks_sql.Executor` over one aiosqlite connection."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self.conn = conn

    async def fetch_one(self, sql: CompiledSQL, values: Mapping[str, Any]) -> Row | None:
        # One hop to the connection's thread: execute, fetch and close in one call.
        rows = await self.conn.execute_fetchall(sql.text, sql.args(values))
        for row in rows:
            return cast("Row", row)  # sqlite3.Row reads columns by name
        return None

    async def execute(self, sql: CompiledSQL, values: Mapping[str, Any]) -> int:
        # One hop: the finished sqlite3 cursor needs no explicit close.
        cursor = await self.conn.execute(sql.text, sql.args(values))
        return cursor.rowcount


class SQLiteDialect:
    """A :class:`~mcp_tasks_sql.SQLDialect` on one SQLite file and table prefix.

    One connection per dialect (opened on first use); operations take turns on it, while
    dialects and processes on the same file coordinate through SQLite's own locks.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Clock = system_clock,
        table_prefix: str = "",
        busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
    ) -> None:
        if str(path) in ("", ":memory:"):
            raise ValueError(
                "SQLiteTaskStore needs a file path; use memory:// for a store in memory"
            )
        self.path = Path(path)
        self.table_prefix = table_prefix
        self._clock = clock
        self._busy_timeout_s = busy_timeout_s
        self._tables = task_tables(prefix=table_prefix)
        self._dialect = SQLiteDialect_aiosqlite()
        self._statements = sql_statements.build(
            self._tables, self._dialect, sa.bindparam("now", type_=sa.BigInteger)
        )
        self._conn: aiosqlite.Connection | None = None
        self._turn = asyncio.Lock()  # one connection runs one transaction at a time
        self._closed = False

    @property
    def url(self) -> str:
        url = "sqlite:///" + quote(str(self.path))
        return with_query(url, **{PREFIX_PARAM: self.table_prefix or None})

    @property
    def statements(self) -> Statements:
        return self._statements

    def with_now(self, values: dict[str, Any]) -> dict[str, Any]:
        values["now"] = self._clock()
        return values

    async def create(self, task: NewTask, options: StoreOptions) -> TaskRecord | None:
        return None  # the shared transaction is already one lock and one fsync

    async def _connect(self) -> aiosqlite.Connection:
        if self._conn is None:
            # Open the file once on a plain thread first: when aiosqlite's own connect fails,
            # its worker thread outlives the call and later reports to a possibly closed loop.
            await asyncio.to_thread(_probe, self.path, self._busy_timeout_s)
            # isolation_level=None: the driver never opens transactions behind our back, so
            # every write transaction is our own BEGIN IMMEDIATE.
            conn = await aiosqlite.connect(
                self.path, timeout=self._busy_timeout_s, isolation_level=None
            )
            try:
                conn.row_factory = sqlite3.Row
                await _switch_to_wal(conn, self._busy_timeout_s)
                # FULL: an acknowledged write survives power loss too, not only a crash.
                await conn.execute("PRAGMA synchronous=FULL")
            except BaseException:
                await conn.close()
                raise
            self._conn = conn
        return self._conn

    async def fetch_one(self, sql: CompiledSQL, values: Mapping[str, Any]) -> Row | None:
        """One statement in its own snapshot, one hop to the connection's thread (``get``)."""
        async with self._turn:
            if self._closed:
                raise StoreUnavailable("The store is closed")
            try:  # driver_errors_as_unavailable, spelled out: a context manager costs here
                conn = self._conn or await self._connect()
                rows = await conn.execute_fetchall(sql.text, sql.args(values))
            except DRIVER_ERRORS as exc:
                raise StoreUnavailable from exc
        for row in rows:
            return cast("Row", row)  # sqlite3.Row reads columns by name
        return None

    @asynccontextmanager
    async def session(self, mode: Mode) -> AsyncIterator[_Connection]:
        async with self._turn:
            if self._closed:
                raise StoreUnavailable("The store is closed")
            with driver_errors_as_unavailable(DRIVER_ERRORS):
                conn = await self._connect()
                if mode is Mode.READ:
                    yield _Connection(conn)  # one statement: its own snapshot
                    return
                try:
                    # Inside the try: a caller cancelled while BEGIN is queued still gets
                    # the ROLLBACK queued behind it on the connection's thread.
                    await conn.execute("BEGIN IMMEDIATE")
                    yield _Connection(conn)
                except BaseException:
                    with anyio.CancelScope(shield=True):
                        await conn.rollback()
                    raise
                await conn.commit()

    async def migrate(self) -> bool:
        async with self.session(Mode.TRANSACTION) as db:
            cursor = await db.conn.execute(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?",
                (self._tables.tasks.name,),
            )
            row = await cursor.fetchone()
            created = row is None or not row[0]
            for statement in sql_statements.ddl(self._tables, self._dialect):
                await db.conn.execute(statement)
            await db.execute(self._statements.init_counter, {})
        return created

    async def diagnose(self) -> list[DiagnosisRow]:
        """The SQLite library, the journal and sync modes of this store's connection, and
        the table prefix's schema."""
        names = schema_objects(self._tables)
        async with self.session(Mode.READ) as db:
            conn = db.conn
            (version,), *_ = await conn.execute_fetchall("SELECT sqlite_version()")
            (journal,), *_ = await conn.execute_fetchall("PRAGMA journal_mode")
            (synchronous,), *_ = await conn.execute_fetchall("PRAGMA synchronous")
            marks = ", ".join("?" for _ in names)
            found = await conn.execute_fetchall(
                f"SELECT name FROM sqlite_master WHERE name IN ({marks})",  # noqa: S608 - marks
                names,
            )
            present = {row[0] for row in found}
            counted = None
            if self._tables.counter.name in present:
                row = await db.fetch_one(self._statements.counted_rows, {})
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
        async with self.session(Mode.TRANSACTION) as db:
            for table in reversed(self._tables.metadata.sorted_tables):
                drop = sa.schema.DropTable(table, if_exists=True)
                await db.conn.execute(str(drop.compile(dialect=self._dialect)))

    async def close(self) -> None:
        async with self._turn:
            self._closed = True
            conn, self._conn = self._conn, None
            if conn is not None:
                with driver_errors_as_unavailable(DRIVER_ERRORS):
                    await conn.close()


async def _switch_to_wal(conn: aiosqlite.Connection, timeout_s: float) -> None:
    """``PRAGMA journal_mode=WAL``, retried for up to ``timeout_s`` while the file is busy.

    On a file still in rollback mode (a new one), the switch reads the header and then
    upgrades to a write lock; SQLite refuses that upgrade with SQLITE_BUSY at once, never
    calling the busy handler (two upgraders would deadlock), so handles opening a new file
    together failed while one of them switched it. Once the file is WAL, the pragma only
    reads.
    """
    deadline = time.monotonic() + timeout_s
    delay = 0.001
    while True:
        try:
            await conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            busy = exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY
            if not busy or time.monotonic() + delay > deadline:
                raise
        await asyncio.sleep(delay)
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


def _probe(path: Path, timeout_s: float) -> None:
    sqlite3.connect(path, timeout=timeout_s).close()


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
        clock: Clock = system_clock,
        table_prefix: str = "",
        busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
    ) -> None:
        dialect = SQLiteDialect(
            path, clock=clock, table_prefix=table_prefix, busy_timeout_s=busy_timeout_s
        )
        super().__init__(dialect, options)

    @property
    def path(self) -> Path:
        return self.dialect.path


class SQLiteStoreBackend:
    """Opens ``sqlite:///relative/tasks.db`` and ``sqlite:////absolute/tasks.db``
    (SQLAlchemy's form); ``?table_prefix=NAME_`` picks the namespace within the file."""

    def open(self, url: str, options: StoreOptions | None = None, /) -> SQLiteTaskStore:
        path, prefix = _parse(url)
        return SQLiteTaskStore(path, options, table_prefix=prefix)

    def namespaced(self, url: str, namespace: str, /) -> str:
        _parse(url)
        return with_query(url, **{PREFIX_PARAM: f"{namespace}_"})

    async def drop(self, url: str, /) -> None:
        path, prefix = _parse(url)
        if not await anyio.Path(path).exists():
            return  # nothing to drop; opening would create the file
        dialect = SQLiteDialect(path, table_prefix=prefix)
        try:
            await dialect.drop()
        finally:
            await dialect.close()


def _parse(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    if parts.scheme.lower() != "sqlite" or parts.netloc or len(parts.path) < 2:
        raise ValueError("A SQLite store URL looks like sqlite:///path/to/tasks.db")
    prefix = query_value(url, PREFIX_PARAM) or ""
    if not all(c.isascii() and (c.isalnum() or c == "_") for c in prefix):
        raise ValueError(f"{PREFIX_PARAM} is letters, digits and '_'")
    return unquote(parts.path)[1:], prefix  # the third slash separates the empty host


def from_url(url: str, options: StoreOptions | None = None) -> SQLiteTaskStore:
    """The store ``url`` names (see :class:`SQLiteStoreBackend`)."""
    return backend.open(url, options)


#: The ``sqlite`` entry point of the ``mcp_tasks.stores`` group.
backend = SQLiteStoreBackend()
