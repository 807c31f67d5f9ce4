"""SQLiteTaskStore: the shared SQL store on one SQLite file, safe for several processes.

Why the SQLite specifics: WAL lets readers run beside the one writer; every write runs in
``BEGIN IMMEDIATE``, which takes the write lock before the first read (a deferred
transaction that reads then writes fails with SQLITE_BUSY under concurrency, whatever the
busy timeout), and the busy timeout makes other connections and processes wait for it.
"""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import unquote, urlsplit

import aiosqlite
import anyio
import sqlalchemy as sa
from sqlalchemy.dialects.sqlite.aiosqlite import SQLiteDialect_aiosqlite

from mcp_tasks.clock import Clock, system_clock
from mcp_tasks.errors import StoreUnavailable
from mcp_tasks.sql import statements
from mcp_tasks.sql.schema import task_tables
from mcp_tasks.sql.store import Mode, SQLTaskStore, driver_errors_as_unavailable

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    from mcp_tasks.models import StoreOptions
    from mcp_tasks.sql.statements import CompiledSQL, Statements
    from mcp_tasks.sql.store import Row

DRIVER_ERRORS: tuple[type[BaseException], ...] = (sqlite3.Error, OSError)
DEFAULT_BUSY_TIMEOUT_S = 30.0


class _Connection:
    """The shared :class:`~mcp_tasks.sql.store.Executor` over one aiosqlite connection."""

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


class SQLiteTaskStore(SQLTaskStore):
    """A :class:`~mcp_tasks.store.Store` in one SQLite file (a real file: ``:memory:`` is
    not shared between connections, use ``memory://`` for that).

    Each handle owns one connection; operations on a handle take turns on it, while
    handles and processes on the same file coordinate through SQLite's own locks.
    """

    def __init__(
        self,
        path: str | Path,
        options: StoreOptions | None = None,
        *,
        clock: Clock = system_clock,
        table_prefix: str = "",
        busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
    ) -> None:
        super().__init__(options)
        if str(path) in ("", ":memory:"):
            raise ValueError(
                "SQLiteTaskStore needs a file path; use memory:// for a store in memory"
            )
        self.path = Path(path)
        self._clock = clock
        self._busy_timeout_s = busy_timeout_s
        self._tables = task_tables(prefix=table_prefix)
        self._statements = statements.build(
            self._tables, SQLiteDialect_aiosqlite(), sa.bindparam("now", type_=sa.BigInteger)
        )
        self._conn: aiosqlite.Connection | None = None
        self._turn = asyncio.Lock()  # one connection runs one transaction at a time

    def __repr__(self) -> str:
        return f"SQLiteTaskStore(path={str(self.path)!r}, max_rows={self.options.max_rows})"

    @property
    def _sql(self) -> Statements:
        return self._statements

    def _with_now(self, values: dict[str, Any]) -> dict[str, Any]:
        values["now"] = self._clock()
        return values

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
                await conn.execute("PRAGMA journal_mode=WAL")
                # FULL: an acknowledged write survives power loss too, not only a crash.
                await conn.execute("PRAGMA synchronous=FULL")
            except BaseException:
                await conn.close()
                raise
            self._conn = conn
        return self._conn

    @asynccontextmanager
    async def _session(self, mode: Mode) -> AsyncIterator[_Connection]:
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

    async def _migrate(self) -> None:
        dialect = SQLiteDialect_aiosqlite()
        async with self._session(Mode.TRANSACTION) as db:
            conn = db.conn  # the DDL runs on this session's connection
            for statement in statements.ddl(self._tables, dialect):
                await conn.execute(statement)
            await db.execute(self._sql.init_counter, {})

    async def close(self) -> None:
        async with self._turn:
            self._closed = True
            conn, self._conn = self._conn, None
            if conn is not None:
                with driver_errors_as_unavailable(DRIVER_ERRORS):
                    await conn.close()


def _probe(path: Path, timeout_s: float) -> None:
    sqlite3.connect(path, timeout=timeout_s).close()


def from_url(url: str, options: StoreOptions | None = None) -> SQLiteTaskStore:
    """``sqlite:///relative/tasks.db`` or ``sqlite:////absolute/tasks.db`` (SQLAlchemy's form)."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "sqlite" or parts.netloc:
        raise ValueError("A SQLite store URL looks like sqlite:///path/to/tasks.db")
    path = unquote(parts.path)[1:]  # the third slash separates the empty host from the path
    return SQLiteTaskStore(path, options)
