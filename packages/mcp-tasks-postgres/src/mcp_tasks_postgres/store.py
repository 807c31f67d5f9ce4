"""The PostgreSQL dialect of the shared SQL store, one schema per namespace.

Why the Postgres specifics: the server's clock decides leases, retries and TTL (every
node agrees on it); a read and its "now" come back in one round trip; writes need no
transaction because the compare-and-set on the row version guards them; claims and
reaping take rows ``FOR UPDATE SKIP LOCKED`` so concurrent workers and reapers never wait
on, nor double-take, each other's rows.
"""

from __future__ import annotations

import asyncio
import re
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import asyncpg
import sqlalchemy as sa
from asyncpg.pool import PoolConnectionProxy
from sqlalchemy.dialects.postgresql import JSON
from sqlalchemy.dialects.postgresql.asyncpg import PGDialect_asyncpg

from mcp_tasks.domain import rules
from mcp_tasks.domain.errors import DuplicateTaskId, MCPTasksError
from mcp_tasks.domain.models import StoreOptions
from mcp_tasks.stores.doctor_rows import clock_skew_row
from mcp_tasks.stores.kit import CloseGuard, DriverErrors, detach, detached
from mcp_tasks.stores.location import StoreLocation, mask_password, query_value, with_query
from mcp_tasks_postgres import fast_create
from mcp_tasks_postgres.asyncpg_quirks import quiet_outage_noise
from mcp_tasks_postgres.notify import relay_notifier
from mcp_tasks_postgres.provision import PostgresTestServers
from mcp_tasks_sql import (
    Mode,
    SQLTaskStore,
    column_upgrades,
    run_on,
    schema_objects,
    schema_row,
    task_tables,
    values_of,
)
from mcp_tasks_sql import counts as sql_counts
from mcp_tasks_sql import statements as sql_statements
from mcp_tasks_sql.schema import owner_turn_row

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    from mcp_tasks.domain.models import NewTask, TaskRecord
    from mcp_tasks.runtime.notifier import RelayNotifier
    from mcp_tasks.stores.doctor_rows import DiagnosisRow
    from mcp_tasks_sql import CompiledSQL, Row, Statements, Transaction

DRIVER_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    OSError,
    TimeoutError,
)
UNAVAILABLE = DriverErrors(*DRIVER_ERRORS)
DEFAULT_SCHEMA = "mcp_tasks"
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}")

# The server's clock in epoch ms. statement_timestamp(), not clock_timestamp(): one value
# for the whole statement, so a claim's WHERE clause and the "now" it returns agree.
SERVER_NOW = "floor(extract(epoch from statement_timestamp()) * 1000)::bigint"

#: How the store's connections name themselves in ``pg_stat_activity`` unless the URL's
#: ``?application_name=`` says otherwise.
_OURS = {"application_name": "mcp-tasks"}

R = TypeVar("R")

Runner = asyncpg.Pool | asyncpg.Connection | PoolConnectionProxy


def _names_itself(url: str) -> bool:
    """The URL sets ``application_name`` (asyncpg sends it as that setting)."""
    return query_value(url, "application_name") is not None


class _Connection:
    """The shared :class:`~mcp_tasks_sql.store.Executor` over an asyncpg pool or connection.

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


class PostgresDialect:
    """A :class:`~mcp_tasks_sql.SQLDialect` on one PostgreSQL schema.

    Each dialect owns a connection pool (created on first use). The schema, tables and
    indexes are created on first use, or ahead of time by ``migrate``.
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        min_connections: int = 1,
        max_connections: int = 10,
        timeout_s: float = StoreOptions().timeout_ms / 1000,
    ) -> None:
        if not _IDENTIFIER.fullmatch(schema):
            raise ValueError("schema must be a lowercase SQL identifier ([a-z_][a-z0-9_]*)")
        self.connect_url, self.schema = url, schema
        self._pool_sizes = (min_connections, max_connections)
        self._timeout_s = timeout_s
        self._dialect = PGDialect_asyncpg()  # type: ignore[no-untyped-call]
        self._tables = task_tables(schema=schema)
        now = sa.literal_column(SERVER_NOW, sa.BigInteger)
        self._statements = sql_statements.build(
            self._tables,
            self._dialect,
            now,
            bump_owner_turn=fast_create.bump_owner_turn(self._tables, self._dialect),
            **sql_counts.counted_statements(self._tables, self._dialect, now),
        )
        self._server_now = fast_create.server_now(self._dialect, now)
        self._bump_and_insert = fast_create.bump_and_insert(
            self._tables, self._dialect, sql_statements.predicates(self._tables, now).active
        )
        self._pool: asyncpg.Pool | None = None
        self._opening: asyncio.Future[asyncpg.Pool] | None = None  # see _get_pool
        self._idle: list[PoolConnectionProxy] = []  # see _borrow
        self._waiting = 0  # sessions waiting in pool.acquire()
        self._guard = CloseGuard()

    @property
    def url(self) -> str:
        return mask_password(with_query(self.connect_url, schema=self.schema))

    @property
    def statements(self) -> Statements:
        return self._statements

    def with_now(self, values: dict[str, Any]) -> dict[str, Any]:
        return values  # the statements read the server's clock themselves

    async def create(self, task: NewTask, options: StoreOptions) -> TaskRecord | None:
        """Two round trips while the namespace and the owner are below their caps (see
        :mod:`.fast_create`); ``None`` (the shared transaction) near either cap, or when
        another create overtook one held to the per-owner cap."""
        async with self.session(Mode.MODIFY) as db:
            clock = await db.fetch_one(self._server_now, {})
            assert clock is not None
            record = rules.new_record(task, clock["now_ms"])
            values = values_of(record)
            values["cap"] = options.max_rows
            values["owner_cap"] = owner_cap = options.owner_cap(task.owner)
            # owner NULL matches no row: a create without a per-owner cap counts nothing
            values["owner"] = None if owner_cap is None else task.owner
            values["turn"] = None if task.owner is None else owner_turn_row(task.owner)
            done = await db.fetch_one(self._bump_and_insert, values)
            assert done is not None
            if done["inserted"]:
                return record
            if done["bumped"]:  # take the bump back (over-counting is safe)
                await db.execute(self._statements.bump_rows, {"delta": -1})
                if owner_cap is None or done["turned"]:  # the id exists
                    raise DuplicateTaskId
        return None

    async def _get_pool(self) -> asyncpg.Pool:
        """The pool, opened once by whichever session needs it first; the sessions that
        need it meanwhile wait for the same opening."""
        pool = self._pool
        if pool is None:
            self._guard.check()
            if self._opening is None:
                self._opening = detach(self._open_pool())  # its failure read, if unawaited
            # Shielded: a session's bound stops its wait, never asyncpg's connect (asyncpg
            # cancelled just after its TCP connect leaves its SSL probe's failure unread);
            # the opening ends by its own timeout.
            pool = await asyncio.shield(self._opening)
        return pool

    async def _open_pool(self) -> asyncpg.Pool:
        try:
            quiet_outage_noise(asyncio.get_running_loop())
            low, high = self._pool_sizes
            pool: asyncpg.Pool = await asyncpg.create_pool(
                self.connect_url,
                min_size=low,
                max_size=high,
                # a URL's own ?application_name= names the connections instead
                server_settings=None if _names_itself(self.connect_url) else _OURS,
                reset=_keep_session,
                # the store's bound on connecting and on each statement
                timeout=self._timeout_s,
                command_timeout=self._timeout_s,
            )
        finally:
            self._opening = None  # after a failure, the next session tries anew
        if self._guard.closed:  # closed while connecting
            pool.terminate()
            self._guard.check()
        self._pool = pool
        return pool

    async def fetch_one(self, sql: CompiledSQL, values: Mapping[str, Any]) -> Row | None:
        """One statement on a lent connection (``get``): no context managers on the way."""
        self._guard.check()
        with UNAVAILABLE:
            pool = await self._get_pool()
            conn = await self._borrow(pool)
            try:
                row: asyncpg.Record | None = await conn.fetchrow(sql.text, *sql.args(values))
            except BaseException:
                await _release(pool, conn)
                raise
            await self._give_back(pool, conn)
            return row

    async def transact(self, mode: Mode, body: Transaction[R]) -> R:
        """``body``'s statements awaited one by one on one lent connection (see
        :meth:`session` for what each mode means here)."""
        async with self.session(mode) as db:
            return await run_on(db, body)

    @asynccontextmanager
    async def session(self, mode: Mode) -> AsyncIterator[_Connection]:
        async with self._lent() as conn:
            if mode is Mode.TRANSACTION:
                async with conn.transaction():
                    yield _Connection(conn)
            else:
                # READ is one statement; MODIFY a read then a compare-and-set on the same
                # connection, with no transaction: the CAS makes read-then-write safe and
                # holds no lock across the round trip.
                yield _Connection(conn)

    @asynccontextmanager
    async def _lent(self) -> AsyncIterator[PoolConnectionProxy]:
        """A connection of the pool for one session, handed back afterwards."""
        self._guard.check()
        with UNAVAILABLE:
            pool = await self._get_pool()
            conn = await self._borrow(pool)
            try:
                yield conn
            except MCPTasksError:  # a rule's answer: the connection itself is fine
                await self._give_back(pool, conn)
                raise
            except BaseException:
                await _release(pool, conn)
                raise
            await self._give_back(pool, conn)

    async def _borrow(self, pool: asyncpg.Pool) -> PoolConnectionProxy:
        """A connection of ``pool``: one a session gave back if there is one.

        asyncpg's acquire and release cost more than a short statement's round trip (a
        queue, a task for the shielded release): a connection a session ends with cleanly
        is kept in ``_idle`` (:meth:`_give_back`), and the next session takes it without
        awaiting. After an error (a driver failure, a cancelled query) it goes back through
        the pool instead, whose release waits out the cancellation or terminates a broken
        connection.
        """
        while self._idle:
            conn = self._idle.pop()
            if _usable(conn):
                return conn
            await pool.release(conn)  # a no-op when asyncpg took it back already
        self._waiting += 1
        try:
            if pool.get_size() < pool.get_max_size():
                # An acquire may connect: detached as the pool's opening is (_get_pool), and
                # a connection it brings after the session stopped waiting goes back.
                return await detached(
                    _acquire(pool, self._timeout_s),
                    abandoned=lambda late: detach(pool.release(late)),
                )
            # Every connection open: the acquire waits for one a session gives back, and
            # connects nothing (a task of its own would cost more than the wait).
            return await _acquire(pool, self._timeout_s)
        finally:
            self._waiting -= 1

    async def _give_back(self, pool: asyncpg.Pool, conn: PoolConnectionProxy) -> None:
        # While sessions wait in pool.acquire() (every connection lent), only the pool can
        # hand them this one.
        if self._waiting or self._guard.closed or not _usable(conn) or conn.is_in_transaction():
            await pool.release(conn)
        else:
            self._idle.append(conn)

    async def migrate(self) -> bool:
        quoted = self._quoted_schema()
        async with self._lent() as conn:
            # Complete already: run no DDL at all. CREATE INDEX IF NOT EXISTS still locks
            # the table, and beside live creates (which hold the counter row) that can
            # deadlock; a complete schema takes no lock.
            if await self._schema_complete(conn):
                return False
            async with conn.transaction():
                # CREATE … IF NOT EXISTS is not safe against itself running concurrently
                # (both may insert the same catalog row): one migration at a time.
                await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", self.schema)
                if await self._schema_complete(conn):
                    return False
                created = not await self._table_exists(conn)
                counted = await self._table_exists(conn, self._tables.counts.name)
                await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quoted}")
                if not created:  # an older table: its added columns before their indexes
                    for statement in await self._column_upgrades(conn):
                        await conn.execute(statement)
                for statement in sql_statements.ddl(self._tables, self._dialect):
                    await conn.execute(statement)
                if not counted:
                    # Writers held off from here to the commit: the counts of the tasks
                    # written before, then the triggers that keep them.
                    tasks = self._dialect.identifier_preparer.format_table(self._tables.tasks)
                    await conn.execute(f"LOCK TABLE {tasks} IN SHARE ROW EXCLUSIVE MODE")
                    for statement in sql_counts.postgres_triggers(self._tables, self._dialect):
                        await conn.execute(statement)
                    for statement in sql_counts.refill_counts(self._tables, self._dialect):
                        await conn.execute(statement)
                await _Connection(conn).execute(self._statements.init_counter, {})
        return created

    async def diagnose(self) -> list[DiagnosisRow]:
        """The server's version, its durability settings, the schema, and its clock
        against this machine's (the store keeps time by the server's)."""
        names = schema_objects(self._tables)
        async with self._lent() as conn:
            sent = time.time()
            server = await conn.fetchrow(
                "SELECT current_setting('server_version') AS version,"
                " current_setting('fsync') AS fsync,"
                " current_setting('synchronous_commit') AS synchronous_commit,"
                " extract(epoch from clock_timestamp()) * 1000 AS now_ms"
            )
            received = time.time()
            found = await conn.fetch(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n"
                " ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = ANY($2)",
                self.schema,
                names,
            )
            present = {row["relname"] for row in found}
            counted = None
            if self._tables.counter.name in present:
                row = await _Connection(conn).fetch_one(self._statements.counted_rows, {})
                counted = None if row is None else int(row["n_rows"])
        assert server is not None  # a SELECT without FROM yields its one row
        return [
            ("postgres", "ok", f"PostgreSQL {server['version']}"),
            _durability_row(server["fsync"], server["synchronous_commit"]),
            schema_row(f"schema {self.schema!r}", [n for n in names if n not in present], counted),
            clock_skew_row(float(server["now_ms"]), sent, received),
        ]

    async def drop(self) -> None:
        """Drop the schema with every table and task in it."""
        quoted = self._quoted_schema()
        async with self._lent() as conn:
            await conn.execute(f"DROP SCHEMA IF EXISTS {quoted} CASCADE")

    def _quoted_schema(self) -> str:
        return str(self._dialect.identifier_preparer.quote_schema(self.schema))

    async def _table_exists(self, conn: PoolConnectionProxy, name: str | None = None) -> bool:
        """Whether the task table (or the table ``name``) exists (a schema missing only an
        index is not new)."""
        found = await conn.fetchval(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = $1 AND c.relname = $2",
            self.schema,
            name or self._tables.tasks.name,
        )
        return bool(found)

    async def _column_upgrades(self, conn: PoolConnectionProxy) -> list[str]:
        """What brings the existing task table to this schema (``column_upgrades``)."""
        found = await conn.fetch(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = $1 AND table_name = $2",
            self.schema,
            self._tables.tasks.name,
        )
        payload = sa.cast(self._tables.tasks.c.payload, JSON)
        work_type = payload["work"]["type"].as_string()
        present = {row["column_name"] for row in found}
        return column_upgrades(self._tables, self._dialect, present, work_type)

    async def _schema_complete(self, conn: PoolConnectionProxy) -> bool:
        """Whether every table and index exists and the counter row is there."""
        names = schema_objects(self._tables)
        found = await conn.fetchval(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = $1 AND c.relname = ANY($2::text[])",
            self.schema,
            names,
        )
        if found != len(names):
            return False
        row = await _Connection(conn).fetch_one(self._statements.counter_exists, {})
        return row is not None and row["n"] == 1

    async def close(self) -> None:
        # A pool still opening is closed by its opening (_open_pool), when it arrives.
        self._guard.close()
        pool, self._pool = self._pool, None
        idle, self._idle = self._idle, []
        if pool is not None:
            with UNAVAILABLE:
                for conn in idle:
                    await pool.release(conn)
                await pool.close()


class PostgresTaskStore(SQLTaskStore):
    """A :class:`~mcp_tasks.stores.protocol.Store` in PostgreSQL; ``schema`` is its namespace."""

    dialect: PostgresDialect

    def __init__(
        self,
        url: str,
        options: StoreOptions | None = None,
        *,
        schema: str = DEFAULT_SCHEMA,
        min_connections: int = 1,
        max_connections: int = 10,
        location: StoreLocation | None = None,
    ) -> None:
        options = options or StoreOptions()
        dialect = PostgresDialect(
            url,
            schema=schema,
            min_connections=min_connections,
            max_connections=max_connections,
            timeout_s=options.timeout_ms / 1000,
        )
        super().__init__(dialect, options, location=location)

    @property
    def schema(self) -> str:
        return self.dialect.schema

    def offer_notifier(self) -> RelayNotifier:
        """LISTEN/NOTIFY on the schema's channel: it hears every process on the schema."""
        return relay_notifier(
            self.dialect.connect_url, self.schema, timeout_s=self.options.timeout_ms / 1000
        )


def _durability_row(fsync: str, synchronous_commit: str) -> DiagnosisRow:
    """fsync and synchronous_commit decide what a crash can take back; off warns."""
    detail = f"fsync {fsync}, synchronous_commit {synchronous_commit}"
    if fsync != "on":
        return ("durability", "warn", f"{detail}: a crash of the machine can corrupt the database")
    if synchronous_commit == "off":
        return (
            "durability",
            "warn",
            f"{detail}: a crash can lose the last acknowledged writes (up to 3 x wal_writer_delay)",
        )
    return ("durability", "ok", f"{detail}: a commit is on disk before it is acknowledged")


def _usable(conn: PoolConnectionProxy) -> bool:
    """Whether a connection lent to the store can still run a statement. When its socket
    closes (the server dropped it: a restart, a blip) asyncpg gives the connection back to
    its pool by itself and detaches this proxy, which then refuses every call, even
    ``is_closed()``; one kept in ``_idle`` meanwhile must not be handed out again."""
    try:
        return not conn.is_closed()
    except asyncpg.InterfaceError:  # detached: the pool has it back
        return False


async def _acquire(pool: asyncpg.Pool, timeout_s: float) -> PoolConnectionProxy:
    conn = await pool.acquire(timeout=timeout_s)
    assert isinstance(conn, PoolConnectionProxy)
    return conn


async def _release(pool: asyncpg.Pool, conn: PoolConnectionProxy) -> None:
    """Hand a connection back to the pool after an error or a cancellation: asyncpg then
    waits out the query's cancellation or terminates the connection, which on a server
    that does not answer takes its own timeout. Detached: a cancelled caller (its bound)
    does not wait for that, and the release's failure is not left unread."""
    await detached(pool.release(conn))


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Pool release hook: nothing to reset. The default runs a reset query (a round trip)
    on every release; this store never changes session state (no SET, LISTEN, cursors or
    session advisory locks), and asyncpg still rolls back a transaction left open."""


class PostgresStoreBackend(PostgresTestServers):
    """Opens ``postgresql://user@host/db`` (or ``postgres://``); ``?schema=name`` picks the
    schema, the namespace (default ``mcp_tasks``); ``?max_connections=N`` and
    ``?min_connections=N`` size the connection pool (default 10 and 1); ``?timeout_ms=`` is
    the store's bound on waiting (``StoreOptions.timeout_ms``)."""

    def locate(self, url: str, /) -> PostgresLocation:
        location = StoreLocation.read(url)
        if location.scheme not in {"postgresql", "postgres"}:
            raise ValueError("A Postgres store URL looks like postgresql://user@host/db")
        schema = location.value("schema") or DEFAULT_SCHEMA
        # Without our parameters: asyncpg would send any other one to the server as a
        # setting.
        connect_url = location.stripped("schema", "min_connections", "max_connections")
        # ?min_connections= and ?max_connections=: whole numbers, 0 <= min <= max and
        # max >= 1 (defaults 1 and 10).
        sizes = {"min_connections": 1, "max_connections": 10}
        for key, default in list(sizes.items()):
            text = location.value(key)
            if text is not None and not (text.isascii() and text.isdigit()):
                raise ValueError(f"A Postgres store's ?{key}= is a whole number")
            sizes[key] = default if text is None else int(text)
        low, high = sizes["min_connections"], sizes["max_connections"]
        if high < 1:
            raise ValueError("A Postgres store's ?max_connections= is at least 1")
        if low > high:
            raise ValueError(
                "A Postgres store's ?min_connections= is at most its ?max_connections="
            )
        return location.specialised(
            PostgresLocation,
            namespace=schema,
            masked=mask_password(with_query(connect_url, schema=schema)),
            connect_url=connect_url,
            schema=schema,
            min_connections=low,
            max_connections=high,
        )

    def open(self, location: PostgresLocation, options: StoreOptions, /) -> PostgresTaskStore:
        return PostgresTaskStore(
            location.connect_url,
            options,
            schema=location.schema,
            min_connections=location.min_connections,
            max_connections=location.max_connections,
            location=location,
        )

    def namespaced(self, location: PostgresLocation, namespace: str, /) -> PostgresLocation:
        return self.locate(with_query(location.url, schema=namespace.lower()))

    async def drop(self, location: PostgresLocation, /) -> None:
        dialect = PostgresDialect(location.connect_url, schema=location.schema, max_connections=1)
        try:
            await dialect.drop()
        finally:
            await dialect.close()


@dataclass(frozen=True, kw_only=True, repr=False)
class PostgresLocation(StoreLocation):
    """A ``postgresql://`` URL read: what asyncpg connects to, the schema (the
    namespace) and the pool's sizes."""

    connect_url: str
    schema: str
    min_connections: int
    max_connections: int


def from_url(url: str, options: StoreOptions | None = None) -> PostgresTaskStore:
    """The store ``url`` names (see :class:`PostgresStoreBackend`)."""
    location = backend.locate(url)
    return backend.open(location, location.options(options))


#: The ``postgresql`` and ``postgres`` entry points of the ``mcp_tasks.stores`` group.
backend = PostgresStoreBackend()
