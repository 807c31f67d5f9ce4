"""Every statement the SQL stores run, built once in SQLAlchemy Core and compiled per dialect.

The stores execute the compiled text with their raw driver (sqlite3, asyncpg): building
and compiling a Core statement per call costs more than the round trip on the hot paths
(``get``, ``put_status``), so each statement is compiled exactly once per store.

Where the database must select rows itself (claim candidates, reaping, the caps, what
``stats`` counts), the ``WHERE`` clauses re-state :func:`~mcp_tasks.domain.rules.claimable`,
:func:`~mcp_tasks.domain.rules.is_reapable`, :func:`~mcp_tasks.domain.rules.counts_toward_cap`,
:func:`~mcp_tasks.domain.rules.is_active` and the rules ``stats`` counts by. Those clauses
live in one place, :class:`Predicates` (built by :func:`predicates`), and :func:`build`
takes them from there; :func:`mcp_tasks_sql.testing.check_predicates` checks each one
against its rule on a real database, and every dialect's tests run it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cache
from typing import TYPE_CHECKING, Any, cast

import sqlalchemy as sa

from mcp_tasks.domain.rules import EXPIRY_HORIZON_MS, UNCLAIMED_AFTER_MS
from mcp_tasks.domain.states import TaskStatus
from mcp_tasks.stores.stats import BUSIEST_OWNERS, COUNTED
from mcp_tasks_sql.schema import ACTIVE, CLAIMABLE, TERMINAL_STATUSES, TaskTables, status_in

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from sqlalchemy.engine.interfaces import Dialect
    from sqlalchemy.sql.compiler import SQLCompiler

#: Columns a store writes (``row_version`` is managed by the statements themselves).
WRITTEN_COLUMNS: tuple[str, ...] = (
    "task_id",
    "owner",
    "status",
    "revision",
    "created_at",
    "last_updated_at",
    "ttl_ms",
    "expires_at",
    "has_work",
    "retry_at",
    "generation",
    "claim_expires_at",
    "payload",
    "work_type",
)


@dataclass(frozen=True, slots=True)
class CompiledSQL:
    """A statement's SQL text for one dialect and how to fill its positional parameters."""

    text: str
    names: tuple[str, ...]
    defaults: Mapping[str, Any]  # literals SQLAlchemy turned into parameters (LIMIT 1, + 1)

    def args(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        """The positional arguments for ``values`` (a name → value mapping)."""
        defaults = self.defaults
        return tuple(values[n] if n in values else defaults[n] for n in self.names)


@dataclass(frozen=True, slots=True)
class Statements:
    """The compiled statements of one namespace on one dialect (see the builders below)."""

    read: CompiledSQL
    insert: CompiledSQL
    cas: CompiledSQL
    bump_rows: CompiledSQL
    count_live: CompiledSQL
    count_active_of_owner: CompiledSQL
    claim_next: CompiledSQL
    claim_one: CompiledSQL
    #: ``claim_next`` of tasks of some work types (S-CLAIM.4): the statement for ``n``
    #: types (parameters ``work_type_0`` … ``work_type_{n-1}``), compiled on first use.
    claim_next_of: Callable[[int], CompiledSQL]
    reap: CompiledSQL
    init_counter: CompiledSQL
    counter_exists: CompiledSQL
    counted_rows: CompiledSQL
    stats: CompiledSQL
    #: The first task whose id sorts after ``after`` (no row: none left), for a maintenance
    #: rewrite (``mcp-tasks rekey``); the store's now as ``now_ms``.
    read_after: CompiledSQL
    #: ``None`` where ``bump_rows`` answers the counter's new ``n_rows`` and ``now_ms``
    #: itself (``UPDATE … RETURNING``). A database whose UPDATE returns no rows makes
    #: ``bump_rows`` a plain UPDATE and reads them with this SELECT right after it, in the
    #: same transaction (the UPDATE holds the counter row's lock until commit).
    read_counter: CompiledSQL | None = None
    #: Where a create may count an owner's tasks in a snapshot older than the counter's
    #: lock (Postgres's fast path): bumps the owner's turn row (``schema.owner_turn_row``,
    #: parameter ``turn``), which a create under the per-owner cap does in its transaction
    #: too, so that the fast path sees it came between. ``None`` elsewhere.
    bump_owner_turn: CompiledSQL | None = None
    #: The counts per status (:func:`mcp_tasks_sql.counts.read_counts`) where the dialect's
    #: migration installs the triggers that keep them; ``None`` elsewhere (``counts()``
    #: then counts with ``stats``).
    counts: CompiledSQL | None = None
    #: ``stats`` from the same counters (:func:`mcp_tasks_sql.counts.read_stats`): the
    #: columns of ``stats``, at a cost that does not grow with the table; ``None`` where
    #: ``counts`` is (``stats()`` then aggregates the table).
    counted_stats: CompiledSQL | None = None


@dataclass(frozen=True, slots=True)
class Predicates:
    """The ``WHERE`` clauses that re-state a rule of :mod:`mcp_tasks.domain.rules` in SQL.

    Each is a boolean SQL expression over one row of the task table at the store's ``now``;
    it must select exactly the rows whose record the rule accepts at that ``now``.
    :func:`mcp_tasks_sql.testing.check_predicates` checks that for every field here.
    """

    claimable: sa.ColumnElement[bool]
    """Re-states :func:`mcp_tasks.domain.rules.claimable`: a claim is legal, has work, due
    (``retry_at``), unexpired, and no live claim. The claim statements select by it."""

    reapable: sa.ColumnElement[bool]
    """Re-states :func:`mcp_tasks.domain.rules.is_reapable`: expired by TTL, or with no TTL
    and terminal for at least the retention (the bind parameter ``retention``, in ms).
    The reap statement deletes by it."""

    unexpired: sa.ColumnElement[bool]
    """Re-states :func:`mcp_tasks.domain.rules.counts_toward_cap`: not expired. The exact
    count at the row cap counts by it."""

    active: sa.ColumnElement[bool]
    """Re-states :func:`mcp_tasks.domain.rules.is_active`: not terminal and not expired.
    The per-owner cap counts by it (with the owner condition beside it)."""

    claimed: sa.ColumnElement[bool]
    """Re-states :func:`mcp_tasks.domain.rules.is_claimed`: active under a live lease.
    ``stats`` counts by it, and by the ones below."""

    lease_lapsed: sa.ColumnElement[bool]
    """Re-states :func:`mcp_tasks.domain.rules.lease_lapsed`: claimable, its claim ran out."""

    retry_due: sa.ColumnElement[bool]
    """Re-states :func:`mcp_tasks.domain.rules.retry_due`: claimable, its retry is due."""

    retry_pending: sa.ColumnElement[bool]
    """Re-states :func:`mcp_tasks.domain.rules.retry_pending`: active, its retry not due."""

    expiring_soon: sa.ColumnElement[bool]
    """Re-states :func:`mcp_tasks.domain.rules.expires_within` with
    :data:`mcp_tasks.domain.rules.EXPIRY_HORIZON_MS`: not expired, expires within it."""

    waiting_unclaimed: sa.ColumnElement[bool]
    """Re-states :func:`mcp_tasks.domain.rules.waits_unclaimed`: claimable, created
    :data:`mcp_tasks.domain.rules.UNCLAIMED_AFTER_MS` or more ago."""


def predicates(tables: TaskTables, now: sa.ColumnElement[int]) -> Predicates:
    """The rule predicates over ``tables`` at ``now`` (see :func:`build` for ``now``)."""
    c = tables.tasks.c
    unexpired = sa.or_(c.expires_at.is_(None), c.expires_at > now)
    active = sa.and_(status_in(c.status, ACTIVE), unexpired)
    claimable = sa.and_(
        status_in(c.status, CLAIMABLE),
        c.has_work,
        sa.or_(c.retry_at.is_(None), c.retry_at <= now),
        sa.or_(c.expires_at.is_(None), c.expires_at > now),
        sa.or_(c.claim_expires_at.is_(None), c.claim_expires_at <= now),
    )
    horizon = sa.literal(EXPIRY_HORIZON_MS, sa.BigInteger)
    return Predicates(
        claimable=claimable,
        reapable=sa.or_(
            sa.and_(c.expires_at.is_not(None), c.expires_at <= now),
            sa.and_(
                c.ttl_ms.is_(None),
                status_in(c.status, TERMINAL_STATUSES),
                c.last_updated_at <= now - sa.bindparam("retention", type_=sa.BigInteger),
            ),
        ),
        unexpired=unexpired,
        active=active,
        claimed=sa.and_(active, c.claim_expires_at > now),
        lease_lapsed=sa.and_(claimable, c.claim_expires_at.is_not(None)),
        retry_due=sa.and_(claimable, c.retry_at.is_not(None)),
        retry_pending=sa.and_(active, c.retry_at > now),
        expiring_soon=sa.and_(c.expires_at > now, c.expires_at <= now + horizon),
        waiting_unclaimed=sa.and_(
            claimable, c.created_at <= now - sa.literal(UNCLAIMED_AFTER_MS, sa.BigInteger)
        ),
    )


def compile_statement(statement: sa.ClauseElement, dialect: Dialect) -> CompiledSQL:
    """Compile once; positional parameters in the dialect's own style (``?`` or ``$n``)."""
    compiled = cast("SQLCompiler", statement.compile(dialect=dialect))
    defaults = {k: v for k, v in compiled.params.items() if v is not None}
    return CompiledSQL(compiled.string, tuple(compiled.positiontup or ()), defaults)


def build(
    tables: TaskTables, dialect: Dialect, now: sa.ColumnElement[int], **spelled: CompiledSQL
) -> Statements:
    """Every statement for ``tables`` on ``dialect``.

    ``now`` is the store's clock as SQL: a bind parameter named ``now`` on SQLite (the
    injectable clock), the server's clock expression on Postgres. Statements that decide
    by time return it as ``now_ms`` so the rules run on the very instant the SQL used.
    Claims, reaping and the caps select rows by :func:`predicates` of ``tables`` and ``now``.

    ``spelled`` are the statements a database spells its own way, already compiled, by
    their :class:`Statements` field name (say ``insert`` where there is no
    ``ON CONFLICT``): each answers exactly what the shared one does, with the same
    parameters, and the shared spelling of it is never compiled.
    """
    t, c = tables.tasks, tables.tasks.c
    now_ms = now.label("now_ms")
    one = sa.select(sa.literal_column("1").label("one")).subquery("one")
    insert = _insert_of(dialect)

    where = predicates(tables, now)
    claim_next = (
        sa.select(now_ms, t)
        .where(where.claimable)
        .order_by(c.created_at, c.task_id)  # rules.claim_order
        .limit(1)
        .with_for_update(skip_locked=True)
    )
    doomed = reap_candidates(tables, where, now)
    count = sa.select(sa.func.count().label("n")).select_from(t)
    counter = tables.counter

    shared: dict[str, sa.ClauseElement] = {
        # One round trip: the store's now and the row (all NULL when there is none).
        "read": sa.select(now_ms, t).select_from(
            one.outerjoin(t, c.task_id == sa.bindparam("task_id", type_=sa.Text))
        ),
        "insert": insert(t)
        .values({name: sa.bindparam(f"v_{name}") for name in WRITTEN_COLUMNS})
        .values(row_version=0)
        .on_conflict_do_nothing(index_elements=[c.task_id]),
        # Compare-and-set on the hidden row version: a lost race updates nothing.
        "cas": sa.update(t)
        .where(c.task_id == sa.bindparam("task_id"), c.row_version == sa.bindparam("row_version"))
        .values({name: sa.bindparam(f"v_{name}") for name in WRITTEN_COLUMNS[1:]})
        .values(row_version=c.row_version + 1),
        "bump_rows": sa.update(counter)
        .where(counter.c.id == 1)
        .values(n_rows=counter.c.n_rows + sa.bindparam("delta", type_=sa.BigInteger))
        .returning(counter.c.n_rows, now_ms),
        "count_live": count.where(where.unexpired),
        "count_active_of_owner": sa.select(sa.func.count().label("n")).select_from(
            sa.select(c.task_id)
            .where(c.owner == sa.bindparam("owner", type_=sa.Text), where.active)
            .limit(sa.bindparam("cap", type_=sa.Integer))
            .subquery("mine")
        ),
        "claim_next": claim_next,
        "claim_one": claim_next.where(c.task_id == sa.bindparam("task_id", type_=sa.Text)),
        "reap": sa.delete(t).where(doomed_ids(c.task_id, doomed, dialect)),
        "init_counter": insert(counter)
        .from_select(
            ["id", "n_rows"],
            # WHERE true: SQLite would read "ON CONFLICT" as a join constraint otherwise.
            sa.select(sa.literal_column("1"), sa.func.count()).select_from(t).where(sa.true()),
        )
        .on_conflict_do_nothing(index_elements=[counter.c.id]),
        "counter_exists": sa.select(sa.func.count().label("n"))
        .select_from(counter)
        .where(counter.c.id == 1),
        "counted_rows": sa.select(counter.c.n_rows).where(counter.c.id == 1),
        "stats": stats(tables, where, now),
        "read_after": sa.select(now_ms, t)
        .where(c.task_id > sa.bindparam("after", type_=sa.Text))
        .order_by(c.task_id)
        .limit(1),
    }
    unknown = spelled.keys() - {field.name for field in fields(Statements)}
    if unknown:
        raise TypeError(f"Statements has no {', '.join(sorted(unknown))}")
    compiled = {
        name: compile_statement(clause, dialect)
        for name, clause in shared.items()
        if name not in spelled
    }

    @cache
    def claim_next_of(n: int) -> CompiledSQL:
        types = [sa.bindparam(f"work_type_{i}", type_=sa.Text) for i in range(n)]
        return compile_statement(claim_next.where(c.work_type.in_(types)), dialect)

    return Statements(**compiled, claim_next_of=claim_next_of, **spelled)


def _insert_of(dialect: Dialect) -> Callable[[sa.Table], Any]:
    """``dialect``'s own ``insert`` (with ``ON CONFLICT``), its module imported only here: a
    process on one database never loads the other's dialect."""
    if dialect.name == "postgresql":
        from sqlalchemy.dialects import postgresql  # noqa: PLC0415

        return postgresql.insert
    from sqlalchemy.dialects import sqlite  # noqa: PLC0415

    return sqlite.insert


def doomed_ids(
    task_id: sa.ColumnElement[str], doomed: sa.Select[Any], dialect: Dialect
) -> sa.ColumnElement[bool]:
    """``task_id`` among the ``doomed`` ids. On Postgres as ``= ANY`` of their array, made
    once: the rows are then found by the primary key whatever the planner guesses of how
    many there are (``IN`` may hash-join them against a scan of the whole table)."""
    if dialect.name != "postgresql":
        return task_id.in_(doomed)
    ids = doomed.subquery("doomed_ids")
    array = sa.select(sa.func.array_agg(ids.c.task_id)).scalar_subquery()
    from sqlalchemy.dialects.postgresql import ARRAY  # noqa: PLC0415 (see _insert_of)

    # The cast makes it one array value: a bare subquery after ANY is a row source.
    return task_id == sa.any_(sa.cast(array, ARRAY(sa.Text())))


def reap_candidates(
    tables: TaskTables, where: Predicates, now: sa.ColumnElement[int]
) -> sa.Select[Any]:
    """The ids ``reap`` deletes: at most ``limit`` rows :attr:`Predicates.reapable`
    accepts, the expired ones first (locked, skipping rows another transaction holds).

    Each of the rule's two ways of being reapable is read from its own index in that
    index's order (``expires_at``; ``last_updated_at`` of terminal rows without TTL),
    never by a scan of the table filtered by the rule: with ``LIMIT`` and no order, a
    planner that expects many reapable rows (no statistics yet, say) scans from the
    table's start for them, and the expired rows, the newest, are at its end.
    """
    c = tables.tasks.c
    limit = sa.bindparam("limit", type_=sa.Integer)
    expired = (
        sa.select(c.task_id)
        .where(where.reapable, c.expires_at.is_not(None), c.expires_at <= now)
        .order_by(c.expires_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
        .subquery("expired")
    )
    retained = (
        sa.select(c.task_id)
        .where(
            where.reapable,
            c.ttl_ms.is_(None),
            status_in(c.status, TERMINAL_STATUSES),
            c.last_updated_at <= now - sa.bindparam("retention", type_=sa.BigInteger),
        )
        .order_by(c.last_updated_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
        .subquery("retained")
    )
    both = sa.union_all(sa.select(expired.c.task_id), sa.select(retained.c.task_id)).subquery(
        "doomed"
    )
    return sa.select(both.c.task_id).limit(limit)


def stats(tables: TaskTables, where: Predicates, now: sa.ColumnElement[int]) -> sa.Select[Any]:
    """``stats``: one row, one statement (one snapshot): the store's now, every row, the
    unexpired ones per status, the rows of each :class:`Predicates` field that
    ``mcp_tasks.stores.stats.COUNTED`` names, the oldest working task's
    ``created_at``, and the active counts per owner, ranked (owners never leave the
    database: only their counts, ``busiest_1`` … largest first, and how many there are)."""
    t, c = tables.tasks, tables.tasks.c

    def counted(condition: sa.ColumnElement[bool]) -> sa.ColumnElement[int]:
        return sa.func.count(sa.case((condition, 1)))

    per_status = [
        counted(sa.and_(c.status == status.value, where.unexpired)).label(f"status_{status.value}")
        for status in TaskStatus
    ]
    working = sa.and_(c.status == TaskStatus.WORKING.value, where.unexpired)
    totals = sa.select(
        sa.func.count().label("rows"),
        *per_status,
        *(counted(getattr(where, name)).label(name) for name in COUNTED),
        sa.func.min(sa.case((working, c.created_at))).label("oldest_working_created_at"),
    ).select_from(t)
    per_owner = (
        sa.select(sa.func.count().label("n"))
        .where(where.active, c.owner.is_not(None))  # ownerless tasks are no owner's
        .group_by(c.owner)
    )
    counts = per_owner.subquery("per_owner")
    ranked = sa.select(
        counts.c.n, sa.func.row_number().over(order_by=counts.c.n.desc()).label("place")
    ).subquery("ranked")
    owners = sa.select(
        sa.func.count().label("owners"),
        *(
            sa.func.max(sa.case((ranked.c.place == place, ranked.c.n))).label(f"busiest_{place}")
            for place in range(1, BUSIEST_OWNERS + 1)
        ),
    ).select_from(ranked)
    totals_row, owners_row = totals.subquery("totals"), owners.subquery("owners")
    return sa.select(now.label("now_ms"), totals_row, owners_row).select_from(
        totals_row.join(owners_row, sa.true())
    )


def ddl(tables: TaskTables, dialect: Dialect) -> list[str]:
    """Idempotent DDL (``IF NOT EXISTS``) for the tables and indexes, in order."""
    out: list[str] = []
    for table in tables.metadata.sorted_tables:
        out.append(str(sa.schema.CreateTable(table, if_not_exists=True).compile(dialect=dialect)))
        for index in sorted(table.indexes, key=lambda i: i.name or ""):
            out.append(
                str(sa.schema.CreateIndex(index, if_not_exists=True).compile(dialect=dialect))
            )
    return out
