"""The task table, its row counter, its counts per status and their indexes: one SQLAlchemy
Core definition."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from mcp_tasks.domain.states import LIVE, TERMINAL, Event, TaskStatus, statuses_allowing

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

# The status lists the SQL selects on, all read from the status machine. Their order is
# part of the SQL text (the partial indexes below must match the queries' predicates), so
# each is built in a fixed order: declaration order, or sorted.
#: Non-terminal: what the per-owner cap counts (rules.is_active).
ACTIVE: tuple[TaskStatus, ...] = LIVE
#: The statuses a claim is legal in (rules.claimable).
CLAIMABLE: tuple[TaskStatus, ...] = statuses_allowing(Event.CLAIM)
#: Terminal: what the retention reaps (rules.is_reapable).
TERMINAL_STATUSES: tuple[TaskStatus, ...] = tuple(sorted(TERMINAL))


def status_in(
    column: sa.ColumnElement[str], statuses: tuple[TaskStatus, ...]
) -> sa.ColumnElement[bool]:
    """``status IN ('…', …)`` with the values inlined, so partial indexes and queries match."""
    return column.in_([sa.literal_column(f"'{status.value}'") for status in statuses])


def is_working(column: sa.ColumnElement[str]) -> sa.ColumnElement[bool]:
    """``status = 'working'`` with the value inlined (the working index's predicate)."""
    return column == sa.literal_column(f"'{TaskStatus.WORKING.value}'")


@dataclass(frozen=True)
class TaskTables:
    """The tables of one namespace."""

    metadata: sa.MetaData
    tasks: sa.Table
    counter: sa.Table
    counts: sa.Table
    """The tasks per status (and with work or not), kept by triggers where a dialect
    installs them (:mod:`mcp_tasks_sql.counts`), as the two below."""
    owner_counts: sa.Table
    """Each owner's active tasks."""
    expiry_counts: sa.Table
    """The tasks that expire in each minute."""


def task_tables(
    *,
    schema: str | None = None,
    prefix: str = "",
    column_types: Mapping[str, sa.types.TypeEngine[Any]] | None = None,
) -> TaskTables:
    """The tables of one namespace: a Postgres ``schema`` and/or a table-name ``prefix``.

    ``column_types`` gives columns of the task table, by name, the type a database needs
    instead of the default one (it shapes only the DDL): a database that cannot index
    TEXT, say, gives ``task_id``, ``owner`` and ``status`` a bounded string type, exact
    (binary, no padding) in comparisons as the ids are.

    The columns are what the database must select on (claims, reaping, the caps) plus the
    compare-and-set ``row_version``; everything else of the aggregate is one JSON text
    ``payload`` (TEXT, not jsonb: jsonb rejects ``\\u0000`` and reorders keys, and we never
    query inside it).
    """
    metadata = sa.MetaData(schema=schema)
    types = column_types or {}
    unknown = types.keys() - {"task_id", "owner", "status", "payload", "work_type"}
    if unknown:
        raise ValueError(f"only the string columns take another type, not {sorted(unknown)}")
    name = f"{prefix}tasks"
    tasks = sa.Table(
        name,
        metadata,
        sa.Column("task_id", types.get("task_id", sa.Text()), primary_key=True),
        sa.Column("owner", types.get("owner", sa.Text()), nullable=True),
        sa.Column("status", types.get("status", sa.Text()), nullable=False),
        sa.Column("revision", sa.BigInteger, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("last_updated_at", sa.BigInteger, nullable=False),
        sa.Column("ttl_ms", sa.BigInteger, nullable=True),
        sa.Column("expires_at", sa.BigInteger, nullable=True),
        sa.Column("has_work", sa.Boolean(create_constraint=False), nullable=False),
        sa.Column("retry_at", sa.BigInteger, nullable=True),
        sa.Column("generation", sa.BigInteger, nullable=False),
        sa.Column("claim_expires_at", sa.BigInteger, nullable=True),
        sa.Column("row_version", sa.BigInteger, nullable=False),
        sa.Column("payload", types.get("payload", sa.Text()), nullable=False),
        # Added after the first schema (so last): ``migrate`` adds it to an older table
        # and fills it from the payload (:func:`work_type_backfill`).
        sa.Column("work_type", types.get("work_type", sa.Text()), nullable=True),
    )
    c = tasks.c
    # Claims without a task id: the oldest eligible task among claimable tasks with work.
    sa.Index(
        f"{name}_claim_ix",
        c.created_at,
        c.task_id,
        postgresql_where=sa.and_(c.has_work, status_in(c.status, CLAIMABLE)),
        sqlite_where=sa.and_(c.has_work, status_in(c.status, CLAIMABLE)),
    )
    # Claims for some work types (S-CLAIM.4): the oldest eligible task of each type.
    sa.Index(
        f"{name}_claim_type_ix",
        c.work_type,
        c.created_at,
        c.task_id,
        postgresql_where=sa.and_(c.has_work, status_in(c.status, CLAIMABLE)),
        sqlite_where=sa.and_(c.has_work, status_in(c.status, CLAIMABLE)),
    )
    # Reaping by TTL, and counting unexpired rows at the cap.
    sa.Index(f"{name}_expires_ix", c.expires_at)
    # Reaping terminal tasks with no TTL after the retention.
    no_ttl_terminal = sa.and_(c.ttl_ms.is_(None), status_in(c.status, TERMINAL_STATUSES))
    sa.Index(
        f"{name}_retention_ix",
        c.last_updated_at,
        postgresql_where=no_ttl_terminal,
        sqlite_where=no_ttl_terminal,
    )
    # The per-owner cap on active tasks.
    sa.Index(
        f"{name}_owner_active_ix",
        c.owner,
        postgresql_where=status_in(c.status, ACTIVE),
        sqlite_where=status_in(c.status, ACTIVE),
    )
    # One row (id 1) counting the rows of ``tasks``: creates lock it, so the row cap is
    # checked and the insert made atomically, and the exact count of unexpired rows is
    # only taken when the cheap count says the cap could be reached. Where creates may
    # skip its lock (Postgres), rows 2 and up are owners' turns (owner_turn_row).
    counter = sa.Table(
        f"{prefix}task_rows",
        metadata,
        sa.Column("id", sa.SmallInteger, primary_key=True, autoincrement=False),
        sa.Column("n_rows", sa.BigInteger, nullable=False),
    )
    # Where stats reads the tasks whose figure moves with the clock alone: live leases and
    # lapsed ones, retries due and pending, the oldest working task.
    live = status_in(c.status, ACTIVE)
    leased = sa.and_(live, c.claim_expires_at.is_not(None))
    retrying = sa.and_(live, c.retry_at.is_not(None))
    working = is_working(c.status)
    sa.Index(f"{name}_leases_ix", c.claim_expires_at, postgresql_where=leased, sqlite_where=leased)
    sa.Index(f"{name}_retries_ix", c.retry_at, postgresql_where=retrying, sqlite_where=retrying)
    sa.Index(f"{name}_working_ix", c.created_at, postgresql_where=working, sqlite_where=working)
    # The counters the triggers of mcp_tasks_sql.counts keep where a dialect installs them:
    # ``n`` tasks of ``status``, with work (``work`` 1) or not, in counter ``slot``; each
    # owner's active tasks; the tasks whose ``expires_at`` falls in each ``minute``.
    counts = sa.Table(
        f"{prefix}task_status_counts",
        metadata,
        sa.Column("status", types.get("status", sa.Text()), primary_key=True),
        sa.Column("work", sa.SmallInteger, primary_key=True, autoincrement=False),
        sa.Column("slot", sa.SmallInteger, primary_key=True, autoincrement=False),
        sa.Column("n", sa.BigInteger, nullable=False),
    )
    owner_counts = sa.Table(
        f"{prefix}task_owner_counts",
        metadata,
        sa.Column("owner", types.get("owner", sa.Text()), primary_key=True),
        sa.Column("n", sa.BigInteger, nullable=False),
    )
    expiry_counts = sa.Table(
        f"{prefix}task_expiry_counts",
        metadata,
        sa.Column("minute", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("slot", sa.SmallInteger, primary_key=True, autoincrement=False),
        sa.Column("n", sa.BigInteger, nullable=False),
    )
    return TaskTables(metadata, tasks, counter, counts, owner_counts, expiry_counts)


#: How many owners' turn rows the counter table may hold (ids 2 and up, within SMALLINT).
OWNER_TURN_ROWS = 32_000


def owner_turn_row(owner: str) -> int:
    """The counter table's row that counts the creates of ``owner`` (and of the owners that
    share it): a create held to the per-owner cap bumps it, so a create that counted the
    owner's tasks in an older snapshot sees that another create of the owner came between."""
    digest = hashlib.sha256(owner.encode("utf-8", "surrogatepass")).digest()
    return 2 + int.from_bytes(digest[:8], "big") % OWNER_TURN_ROWS


def schema_objects(tables: TaskTables) -> list[str]:
    """The names of every table and index of a namespace, as the catalog lists them."""
    sorted_tables = tables.metadata.sorted_tables
    names = [table.name for table in sorted_tables]
    return names + [index.name for table in sorted_tables for index in table.indexes if index.name]


#: Columns of the task table added after its first schema, in order: ``migrate`` adds each
#: one an older table lacks and fills it from the payload (:func:`column_upgrades`).
ADDED_COLUMNS: tuple[str, ...] = ("work_type",)


def column_upgrades(
    tables: TaskTables,
    dialect: sa.engine.Dialect,
    present: Collection[str],
    work_type_in_payload: sa.ColumnElement[str],
) -> list[str]:
    """The statements that bring an existing task table whose columns are ``present`` to
    this schema, before its indexes are created: ``ALTER TABLE … ADD COLUMN`` for each of
    :data:`ADDED_COLUMNS` it lacks, then the fill of the rows written before.
    ``work_type_in_payload`` is the dialect's JSON path ``$.work.type`` of ``payload``."""
    t, quote = tables.tasks, dialect.identifier_preparer
    out: list[str] = []
    for name in ADDED_COLUMNS:
        if name not in present:
            kind = t.c[name].type.compile(dialect=dialect)
            out.append(f"ALTER TABLE {quote.format_table(t)} ADD COLUMN {quote.quote(name)} {kind}")
    if "work_type" not in present:
        fill = (
            sa.update(t)
            .where(t.c.has_work, t.c.work_type.is_(None))
            .values(work_type=work_type_in_payload)
        )
        out.append(str(fill.compile(dialect=dialect, compile_kwargs={"literal_binds": True})))
    return out
