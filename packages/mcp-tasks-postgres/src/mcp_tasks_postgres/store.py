"""PostgresTaskStore: the shared SQL store on PostgreSQL, one schema per namespace.

Why the Postgres specifics: the server's clock decides leases, retries and TTL (every
node agrees on it); a read and its "now" come back in one round trip; writes need no
transaction because the compare-and-set on the row version guards them; claims and
reaping take rows ``FOR UPDATE SKIP LOCKED`` so concurrent workers and reapers never wait
on, nor double-take, each other's rows.
"""

from __future__ import annotations

import asyncio
import re
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg
import sqlalchemy as sa
from asyncpg.pool import PoolConnectionProxy
from sqlalchemy.dialects.postgresql.asyncpg import PGDialect_asyncpg

from mcp_tasks import rules
from mcp_tasks.errors import DuplicateTaskId, StoreUnavailable
from mcp_tasks.sql import statements
from mcp_tasks.sql.schema import task_tables
from mcp_tasks.sql.store import Mode, SQLTaskStore, driver_errors_as_unavailable, values_of
from mcp_tasks_postgres import fast_create

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    from mcp_tasks.models import NewTask, StoreOptions, TaskRecord
    from mcp_tasks.sql.statements import CompiledSQL, Statements
    from mcp_tasks.sql.store import Row

DRIVER_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    OSError,
    TimeoutError,
)
DEFAULT_SCHEMA = "mcp_tasks"
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}")

# The server's clock in epoch ms. statement_timestamp(), not clock_timestamp(): one value
# for the whole statement, so a claim's WHERE clause and the "now" it returns agree.
SERVER_NOW = "floor(extract(epoch from statement_timestamp()) * 1000)::bigint"

Runner = asyncpg.Pool | asyncpg.Connection | PoolConnectionProxy


class _Connection:
    """The shared :class:`~mcp_tasks.sql.store.Executor` over an asyncpg pool or connection.

    Raw asyncpg with statements compiled once: asyncpg prepares and caches each text per
    connection, so ``get`` and ``put_status`` pay only their round trips, not SQLAlchemy.
    """

    def __init__(self, runner: Runner) -> None:
        self._runner = runner

    async def fetch_one(self, sql: CompiledSQL, values: Mapping[str, Any]) -> Row | None:
        row: asyncpg.Record | None = await self._runner.fetchrow(sql.text, *sql.args(values))
        return row  # asyncpg.Record maps column names to values

    async def execute(self, sql: CompiledSQL, values: Mapping[str, Any]) -> int:
        status: str = await self._runner.execute(sql.text, *sql.args(values))
        return int(status.rsplit(" ", 1)[-1])  # "UPDATE 1", "INSERT 0 1", "DELETE 3"


class PostgresTaskStore(SQLTaskStore):
    """A :class:`~mcp_tasks.store.Store` in PostgreSQL; ``schema`` is its namespace.

    Each handle owns a connection pool (created on first use). The schema, tables and
    indexes are created on first use, or ahead of time by :meth:`migrate`.
    """

    def __init__(
        self,
        url: str,
        options: StoreOptions | None = None,
        *,
        schema: str = DEFAULT_SCHEMA,
        min_connections: int = 1,
        max_connections: int = 10,
    ) -> None:
        super().__init__(options)
        if not _IDENTIFIER.fullmatch(schema):
            raise ValueError("schema must be a lowercase SQL identifier ([a-z_][a-z0-9_]*)")
        self.url, self.schema = url, schema
        self._pool_sizes = (min_connections, max_connections)
        self._dialect = PGDialect_asyncpg()  # type: ignore[no-untyped-call]
        self._tables = task_tables(schema=schema)
        now = sa.literal_column(SERVER_NOW, sa.BigInteger)
        self._statements = statements.build(self._tables, self._dialect, now)
        self._server_now = fast_create.server_now(self._dialect, now)
        self._bump_and_insert = fast_create.bump_and_insert(self._tables, self._dialect)
        self._pool: asyncpg.Pool | None = None
        self._pool_lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"PostgresTaskStore(url={mask_password(self.url)!r}, schema={self.schema!r})"

    @property
    def _sql(self) -> Statements:
        return self._statements

    def _with_now(self, values: dict[str, Any]) -> dict[str, Any]:
        return values  # the statements read the server's clock themselves

    async def create(self, task: NewTask) -> TaskRecord:
        """Two round trips while the namespace is below its cap (see :mod:`.fast_create`);
        the shared transaction near the cap and with a per-owner cap."""
        if self.options.max_active_per_owner is not None:
            return await super().create(task)
        await self._ensure_ready()
        async with self._session(Mode.MODIFY) as db:
            clock = await db.fetch_one(self._server_now, {})
            assert clock is not None
            record = rules.new_record(task, clock["now_ms"])
            values = values_of(record)
            values["cap"] = self.options.max_rows
            done = await db.fetch_one(self._bump_and_insert, values)
            assert done is not None
            if done["inserted"]:
                return record
            if done["bumped"]:  # the id exists: take the bump back (over-counting is safe)
                await db.execute(self._sql.bump_rows, {"delta": -1})
                raise DuplicateTaskId
        return await super().create(task)

    async def _get_pool(self) -> asyncpg.Pool:
        if self._pool is None:
            async with self._pool_lock:
                if self._closed:
                    raise StoreUnavailable("The store is closed")
                if self._pool is None:
                    low, high = self._pool_sizes
                    self._pool = await asyncpg.create_pool(
                        self.url,
                        min_size=low,
                        max_size=high,
                        server_settings={"application_name": "mcp-tasks"},
                        reset=_keep_session,
                    )
        return self._pool

    @asynccontextmanager
    async def _session(self, mode: Mode) -> AsyncIterator[_Connection]:
        if self._closed:
            raise StoreUnavailable("The store is closed")
        with driver_errors_as_unavailable(DRIVER_ERRORS):
            pool = await self._get_pool()
            if mode is Mode.READ:
                yield _Connection(pool)  # one statement on whichever connection is free
                return
            async with pool.acquire() as conn:
                if mode is Mode.MODIFY:
                    # Read then compare-and-set on one connection (one acquire), and no
                    # transaction: the CAS makes read-then-write safe and holds no lock
                    # across the round trip.
                    yield _Connection(conn)
                    return
                async with conn.transaction():
                    yield _Connection(conn)

    async def _migrate(self) -> None:
        quoted = self._dialect.identifier_preparer.quote_schema(self.schema)
        with driver_errors_as_unavailable(DRIVER_ERRORS):
            pool = await self._get_pool()
            async with pool.acquire() as conn:
                # Complete already: run no DDL at all. CREATE INDEX IF NOT EXISTS still locks
                # the table, and beside live creates (which hold the counter row) that can
                # deadlock; a complete schema takes no lock.
                if await self._schema_complete(conn):
                    return
                async with conn.transaction():
                    # CREATE … IF NOT EXISTS is not safe against itself running concurrently
                    # (both may insert the same catalog row): one migration at a time.
                    await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", self.schema)
                    if await self._schema_complete(conn):
                        return
                    await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quoted}")
                    for statement in statements.ddl(self._tables, self._dialect):
                        await conn.execute(statement)
                    await _Connection(conn).execute(self._sql.init_counter, {})

    async def _schema_complete(self, conn: PoolConnectionProxy) -> bool:
        """Whether every table and index exists and the counter row is there."""
        names = [t.name for t in self._tables.metadata.sorted_tables]
        names += [i.name for t in self._tables.metadata.sorted_tables for i in t.indexes if i.name]
        found = await conn.fetchval(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = $1 AND c.relname = ANY($2::text[])",
            self.schema,
            names,
        )
        if found != len(names):
            return False
        row = await _Connection(conn).fetch_one(self._sql.counter_exists, {})
        return row is not None and row["n"] == 1

    async def close(self) -> None:
        async with self._pool_lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            with driver_errors_as_unavailable(DRIVER_ERRORS):
                await pool.close()


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Pool release hook: nothing to reset. The default runs a reset query (a round trip)
    on every release; this store never changes session state (no SET, LISTEN, cursors or
    session advisory locks), and asyncpg still rolls back a transaction left open."""


def mask_password(url: str) -> str:
    """The URL with its password (if any) replaced by ``***``: safe for logs and reprs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def from_url(url: str, options: StoreOptions | None = None) -> PostgresTaskStore:
    """``postgresql://user@host/db`` (or ``postgres://``); ``?schema=name`` picks the schema."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), DEFAULT_SCHEMA)
    rest = urlencode([(k, v) for k, v in query if k != "schema"])
    return PostgresTaskStore(urlunsplit(parts._replace(query=rest)), options, schema=schema)
