"""The MariaDB / MySQL dialect of mcp-tasks-sql's shared store, one table prefix per namespace.

Why these choices: the server's clock decides leases, retries and TTL (every process on the
database agrees on it); claims take rows ``FOR UPDATE SKIP LOCKED`` (MariaDB 10.6, MySQL 8),
so concurrent workers never wait on nor double-take each other's rows; transactions run at
READ COMMITTED, so a claim or a reap locks the rows it touches and no gaps between them
(InnoDB's default REPEATABLE READ locks gaps, and creates would deadlock against a reap).
Four statements are spelled the MySQL way (no ``ON CONFLICT``, no ``UPDATE … RETURNING``,
no ``LIMIT`` in an ``IN`` subquery); the rest are the shared ones.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import aiomysql
import pymysql
import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.dialects.mysql.aiomysql import MySQLDialect_aiomysql

from mcp_tasks.domain.errors import MCPTasksError, StoreUnavailable
from mcp_tasks.stores.doctor_rows import clock_skew_row
from mcp_tasks.stores.kit import CloseGuard, DriverErrors
from mcp_tasks_sql import (
    CompiledSQL,
    Mode,
    column_upgrades,
    predicates,
    run_on,
    schema_objects,
    schema_row,
)
from mcp_tasks_sql import task_tables as shared_task_tables
from mcp_tasks_sql.statements import WRITTEN_COLUMNS, build, compile_statement

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator, Mapping

    from mcp_tasks.domain.models import NewTask, StoreOptions, TaskRecord
    from mcp_tasks.stores.doctor_rows import DiagnosisRow
    from mcp_tasks_sql import Row, Statements, TaskTables, Transaction

R = TypeVar("R")

UNAVAILABLE = DriverErrors(pymysql.err.MySQLError, OSError, TimeoutError)

#: The server's clock in epoch ms, read the same way on MariaDB and MySQL whatever the
#: session's time zone: UTC_TIMESTAMP, like NOW, is the time the statement began, so a
#: claim's WHERE clause and the ``now_ms`` it returns agree.
SERVER_NOW = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)) DIV 1000)"

#: Run on every new connection (autocommit stays on: single statements need no transaction).
SESSION_SETUP = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"

#: How long ``migrate`` waits for another process's migration (GET_LOCK), in seconds.
MIGRATE_LOCK_S = 60

#: InnoDB's ER_LOCK_DEADLOCK: it chose this transaction as a deadlock's victim and rolled
#: all of it back; "try restarting transaction" is the documented remedy, so a deadlocked
#: transaction (or single statement) runs again from its start, at most this many times.
DEADLOCK = 1213
DEADLOCK_RETRIES = 3


def deadlocked(error: BaseException) -> bool:
    """Whether ``error`` (a ``StoreUnavailable`` or the driver's) is InnoDB's deadlock."""
    cause = error.__cause__ if error.__cause__ is not None else error
    return isinstance(cause, pymysql.err.OperationalError) and cause.args[:1] == (DEADLOCK,)


def column_types(server_version: str) -> dict[str, sa.types.TypeEngine[Any]]:
    """The string columns as InnoDB needs them: indexed ones bounded, compared exactly
    (binary and NO PAD: ``'a'`` is not ``'A'`` nor ``'a '``), the payload as LONGTEXT."""
    exact = "utf8mb4_nopad_bin" if "mariadb" in server_version.lower() else "utf8mb4_0900_bin"

    def key(length: int) -> sa.types.TypeEngine[Any]:
        return mysql.VARCHAR(length, charset="utf8mb4", collation=exact)

    return {
        "task_id": key(255),
        # 768 characters of 4 bytes: InnoDB's largest index key (3072 bytes).
        "owner": key(768),
        "status": key(32),
        "work_type": key(255),
        "payload": mysql.LONGTEXT(charset="utf8mb4", collation="utf8mb4_bin"),
    }


def mysql_statements(tables: TaskTables, dialect: MySQLDialect_aiomysql) -> Statements:
    """The shared statements, with the four MySQL spells its own way."""
    t, counter = tables.tasks, tables.counter
    now = sa.literal_column(SERVER_NOW, sa.BigInteger)
    values: dict[str, Any] = {name: sa.bindparam(f"v_{name}") for name in WRITTEN_COLUMNS}
    # An existing id updates nothing (0 rows: the connection does not ask for found rows).
    insert = mysql.insert(t).values(values).values(row_version=0)
    first_count = sa.select(sa.literal_column("1", sa.Integer), sa.func.count()).select_from(t)
    init_counter = mysql.insert(counter).from_select(["id", "n_rows"], first_count)
    # MySQL allows no LIMIT in an IN subquery, but does in a derived table (materialised,
    # so the DELETE may read its own table there). SKIP LOCKED: the reap never waits for a
    # row a writer holds, so it cannot deadlock with the writer's compare-and-set.
    doomed = (
        sa.select(t.c.task_id)
        .where(predicates(tables, now).reapable)
        .limit(sa.bindparam("limit", type_=sa.Integer))
        .with_for_update(skip_locked=True)
        .subquery("doomed")
    )

    def compiled(statement: sa.ClauseElement) -> CompiledSQL:
        return compile_statement(statement, dialect)

    return build(
        tables,
        dialect,
        now,
        insert=compiled(insert.on_duplicate_key_update(task_id=t.c.task_id)),
        init_counter=compiled(init_counter.on_duplicate_key_update(id=counter.c.id)),
        bump_rows=compiled(
            sa.update(counter)
            .where(counter.c.id == 1)
            .values(n_rows=counter.c.n_rows + sa.bindparam("delta", type_=sa.BigInteger))
        ),
        read_counter=compiled(
            sa.select(counter.c.n_rows, now.label("now_ms")).where(counter.c.id == 1)
        ),
        reap=compiled(sa.delete(t).where(t.c.task_id.in_(sa.select(doomed.c.task_id)))),
    )


class MySQLRow:
    """A result row read by column name, iterated in column order (the SQL layer's Row)."""

    __slots__ = ("_index", "_values")

    def __init__(self, index: Mapping[str, int], values: tuple[Any, ...]) -> None:
        self._index = index
        self._values = values

    def __getitem__(self, key: str, /) -> Any:
        return self._values[self._index[key]]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)


class Connection:
    """The SQL layer's Executor on one aiomysql connection."""

    def __init__(self, conn: aiomysql.Connection) -> None:
        self.conn = conn

    async def fetch_one(self, sql: CompiledSQL, values: Mapping[str, Any]) -> Row | None:
        async with self.conn.cursor() as cursor:
            await cursor.execute(sql.text, sql.args(values))
            found = await cursor.fetchone()
            if found is None:
                return None
            index = {column[0]: number for number, column in enumerate(cursor.description)}
            return MySQLRow(index, found)

    async def execute(self, sql: CompiledSQL, values: Mapping[str, Any]) -> int:
        async with self.conn.cursor() as cursor:
            await cursor.execute(sql.text, sql.args(values))
            touched: int = cursor.rowcount
            return touched


class MySQLDialect:
    """A :class:`mcp_tasks_sql.SQLDialect` on one database of a MariaDB or MySQL server,
    its tables named with ``table_prefix``. Owns an aiomysql pool, created on first use."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        user: str,
        password: str,
        database: str,
        table_prefix: str = "",
        max_connections: int = 10,
        url: str,
    ) -> None:
        self._connect = {
            "host": host,
            "port": port,
            "user": user,
            "password": password,
            "db": database,
        }
        self.database, self.table_prefix = database, table_prefix
        self.max_connections = max_connections
        self._url = url
        self._sa_dialect = MySQLDialect_aiomysql()
        self._tables = shared_task_tables(prefix=table_prefix)
        self._statements = mysql_statements(self._tables, self._sa_dialect)
        self._pool: aiomysql.Pool | None = None
        self._pool_lock = asyncio.Lock()
        self._guard = CloseGuard()

    @property
    def url(self) -> str:
        return self._url

    @property
    def statements(self) -> Statements:
        return self._statements

    def with_now(self, values: dict[str, Any]) -> dict[str, Any]:
        return values  # the statements read the server's clock themselves

    async def create(self, task: NewTask, options: StoreOptions) -> TaskRecord | None:
        return None  # the shared create: one transaction, the counter row locked

    async def fetch_one(self, sql: CompiledSQL, values: Mapping[str, Any]) -> Row | None:
        async with self._lent() as conn:
            return await Connection(conn).fetch_one(sql, values)

    async def transact(self, mode: Mode, body: Transaction[R]) -> R:
        """READ and MODIFY run in autocommit (a MODIFY's compare-and-set guards its
        read-then-write and holds no lock across the round trip); TRANSACTION commits
        every statement together or none. A deadlock's victim, rolled back whole by
        InnoDB, runs again (:data:`DEADLOCK_RETRIES`)."""
        for _ in range(DEADLOCK_RETRIES):
            try:
                return await self._transact_once(mode, body)
            except StoreUnavailable as error:
                if not deadlocked(error):
                    raise
        return await self._transact_once(mode, body)

    async def _transact_once(self, mode: Mode, body: Transaction[R]) -> R:
        async with self._lent() as conn:
            if mode is not Mode.TRANSACTION:
                return await run_on(Connection(conn), body)
            await conn.begin()
            try:
                result = await run_on(Connection(conn), body)
            except MCPTasksError:  # a rule's answer: undo, the connection is fine
                await conn.rollback()
                raise
            await conn.commit()
            return result

    async def _get_pool(self) -> aiomysql.Pool:
        if self._pool is None:
            async with self._pool_lock:
                self._guard.check()
                if self._pool is None:
                    self._pool = await aiomysql.create_pool(
                        minsize=1,
                        maxsize=self.max_connections,
                        autocommit=True,
                        charset="utf8mb4",
                        init_command=SESSION_SETUP,
                        pool_recycle=3600,
                        **self._connect,
                    )
        return self._pool

    @asynccontextmanager
    async def _lent(self) -> AsyncIterator[aiomysql.Connection]:
        """A connection of the pool; closed instead of reused after anything but a rule's
        answer (a query cancelled or failed midway leaves it in an unknown state)."""
        self._guard.check()
        with UNAVAILABLE:
            pool = await self._get_pool()
            conn = await pool.acquire()
            try:
                yield conn
            except MCPTasksError:
                raise
            except BaseException:
                conn.close()
                raise
            finally:
                pool.release(conn)

    async def server_version(self) -> str:
        async with self._lent() as conn, conn.cursor() as cursor:
            await cursor.execute("SELECT VERSION()")
            (version,) = await cursor.fetchone()
            return str(version)

    async def migrate(self) -> bool:
        """Create the tables, indexes and counter row that are missing, one process at a
        time (a named lock of the server; CREATE INDEX has no IF NOT EXISTS on MySQL)."""
        tables = shared_task_tables(
            prefix=self.table_prefix, column_types=column_types(await self.server_version())
        )
        lock = f"mcp_tasks_migrate:{self.database}.{self.table_prefix}"
        async with self._lent() as conn, conn.cursor() as cursor:
            await cursor.execute("SELECT GET_LOCK(%s, %s)", (lock, MIGRATE_LOCK_S))
            (locked,) = await cursor.fetchone()
            if locked != 1:
                raise TimeoutError("another migration of this namespace holds its lock")
            try:
                present = await self._present(cursor)
                created = tables.tasks.name not in present
                if not created:  # an older table: its added columns before their indexes
                    for statement in await self._column_upgrades(cursor, tables):
                        await cursor.execute(statement)
                for table in tables.metadata.sorted_tables:
                    if table.name not in present:
                        await cursor.execute(self._create_table(table))
                        continue
                    for index in sorted(table.indexes, key=lambda i: i.name or ""):
                        if index.name not in present:
                            await cursor.execute(self._ddl(sa.schema.CreateIndex(index)))
                init = self._statements.init_counter
                await cursor.execute(init.text, init.args({}))
            finally:
                await cursor.execute("SELECT RELEASE_LOCK(%s)", (lock,))
        return created

    def _ddl(self, element: sa.schema.ExecutableDDLElement) -> str:
        return str(element.compile(dialect=self._sa_dialect))

    def _create_table(self, table: sa.Table) -> str:
        """CREATE TABLE with its indexes in the one statement: DDL is most of what a new
        namespace costs, and each statement of it waits for the server's data dictionary."""
        quote = self._sa_dialect.identifier_preparer.quote
        indexes = [
            f"INDEX {quote(index.name)} ({', '.join(quote(c.name) for c in index.columns)})"
            for index in sorted(table.indexes, key=lambda i: i.name or "")
            if index.name
        ]
        text = self._ddl(sa.schema.CreateTable(table)).rstrip()
        assert text.endswith(")"), text  # the column list closes the statement
        return text[:-1].rstrip() + "".join(f",\n\t{index}" for index in indexes) + "\n)"

    async def _column_upgrades(self, cursor: aiomysql.Cursor, tables: TaskTables) -> list[str]:
        """What brings the existing task table to the shared schema (``column_upgrades``)."""
        await cursor.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = DATABASE() AND table_name = %s",
            (tables.tasks.name,),
        )
        present = {str(name) for (name,) in await cursor.fetchall()}
        payload = tables.tasks.c.payload
        work_type = sa.func.json_unquote(sa.func.json_extract(payload, "$.work.type"))
        return column_upgrades(tables, self._sa_dialect, present, work_type)

    async def _present(self, cursor: aiomysql.Cursor) -> set[str]:
        """Which of this namespace's tables and indexes the catalog lists."""
        tables = [t.name for t in self._tables.metadata.sorted_tables]
        among = f"table_schema = DATABASE() AND table_name IN ({', '.join(['%s'] * len(tables))})"
        await cursor.execute(
            f"SELECT table_name FROM information_schema.tables WHERE {among}"
            f" UNION SELECT index_name FROM information_schema.statistics WHERE {among}",
            (*tables, *tables),
        )
        return {str(name) for (name,) in await cursor.fetchall()}

    async def diagnose(self) -> list[DiagnosisRow]:
        """The server's version, its durability settings, the namespace's tables, and its
        clock against this machine's (the store keeps time by the server's)."""
        names = schema_objects(self._tables)
        async with self._lent() as conn, conn.cursor() as cursor:
            sent = time.time()
            await cursor.execute(
                "SELECT VERSION(), @@innodb_flush_log_at_trx_commit, @@log_bin, @@sync_binlog,"
                f" {SERVER_NOW}"
            )
            received = time.time()
            version, flush, log_bin, sync_binlog, now_ms = await cursor.fetchone()
            present = await self._present(cursor)
            counted = None
            if self._tables.counter.name in present:
                counter = Connection(conn)
                row = await counter.fetch_one(self._statements.counted_rows, {})
                counted = None if row is None else int(row["n_rows"])
        where = f"table prefix {self.table_prefix!r}" if self.table_prefix else "no table prefix"
        return [
            ("mysql", "ok", version if "mariadb" in version.lower() else f"MySQL {version}"),
            durability_row(int(flush), bool(log_bin), int(sync_binlog)),
            schema_row(
                f"{where} in {self.database!r}", [n for n in names if n not in present], counted
            ),
            clock_skew_row(float(now_ms), sent, received),
        ]

    async def drop(self) -> None:
        """Drop this namespace's tables with every task in them."""
        quote = self._sa_dialect.identifier_preparer.quote
        async with self._lent() as conn, conn.cursor() as cursor:
            present = await self._present(cursor)
            # Only those there: the server warns of a missing one, and the driver re-raises it.
            names = [t.name for t in self._tables.metadata.sorted_tables if t.name in present]
            if names:
                await cursor.execute(f"DROP TABLE {', '.join(map(quote, names))}")

    async def close(self) -> None:
        async with self._pool_lock:
            self._guard.close()
            pool, self._pool = self._pool, None
        if pool is not None:
            with UNAVAILABLE:
                pool.close()
                await pool.wait_closed()


def durability_row(flush_log_at_trx_commit: int, log_bin: bool, sync_binlog: int) -> DiagnosisRow:
    """innodb_flush_log_at_trx_commit (and sync_binlog with a binary log) decide what a crash
    can take back: anything but 1 warns."""
    detail = f"innodb_flush_log_at_trx_commit {flush_log_at_trx_commit}"
    if log_bin:
        detail += f", sync_binlog {sync_binlog}"
    if flush_log_at_trx_commit != 1:
        return ("durability", "warn", f"{detail}: a crash can lose the last second of commits")
    if log_bin and sync_binlog != 1:
        return (
            "durability",
            "warn",
            f"{detail}: a crash can lose commits from the binary log (replicas, recovery)",
        )
    return ("durability", "ok", f"{detail}: a commit is on disk before it is acknowledged")
