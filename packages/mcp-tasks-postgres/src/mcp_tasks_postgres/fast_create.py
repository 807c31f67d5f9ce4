"""Postgres-only statements for ``create`` in two round trips instead of a four-trip transaction.

Under READ COMMITTED a single ``UPDATE`` re-checks its ``WHERE`` on the newest row version
after waiting for a lock, so bumping the namespace's row counter only while it is below the
cap, and inserting only when the bump happened, is atomic in one statement. Only when the
counter says the cap could be reached (it also counts expired rows not reaped yet) must the
exact count run, and that needs a fresh snapshot after the lock: the shared transactional
path of :class:`~mcp_tasks_sql.store.SQLTaskStore` does it.

A create under a per-owner cap counts the owner's active tasks in the statement's snapshot,
taken before the counter's lock. The count is current only if no create of the same owner
committed since the snapshot, so every create under that cap also bumps its owner's turn row
(``schema.owner_turn_row``, a row of the counter table), here only if the row is as the
snapshot saw it: the re-check on its newest version refuses the bump once another create of
the owner came between, and the create goes the shared transactional way, which bumps the
turn row too. Creates of other owners do not stand in each other's way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from mcp_tasks_sql.statements import WRITTEN_COLUMNS, CompiledSQL, compile_statement

if TYPE_CHECKING:
    from sqlalchemy.engine.interfaces import Dialect

    from mcp_tasks_sql.schema import TaskTables


def server_now(dialect: Dialect, now: sa.ColumnElement[int]) -> CompiledSQL:
    """The server's clock, alone (what ``new_record`` needs before the insert)."""
    return compile_statement(sa.select(now.label("now_ms")), dialect)


def bump_owner_turn(tables: TaskTables, dialect: Dialect) -> CompiledSQL:
    """Add one to the turn row ``turn`` (created at 1): the transactional path's bump."""
    counter = tables.counter
    statement = (
        postgresql.insert(counter)
        .values(id=sa.bindparam("turn", type_=sa.SmallInteger), n_rows=1)
        .on_conflict_do_update(index_elements=[counter.c.id], set_={"n_rows": counter.c.n_rows + 1})
    )
    return compile_statement(statement, dialect)


def bump_and_insert(
    tables: TaskTables, dialect: Dialect, active: sa.ColumnElement[bool]
) -> CompiledSQL:
    """Bump the counter if below ``cap`` (NULL: no cap); under ``owner_cap`` (NULL: none),
    if ``owner`` has fewer active tasks (``active``, counted up to the cap), bump its turn
    row ``turn`` if the row is as the statement's snapshot saw it; insert the row if bumped
    (and, under ``owner_cap``, the turn taken).

    Returns ``bumped``, ``turned`` and ``inserted`` (0 or 1 each): bumped and turned (or no
    ``owner_cap``) but not inserted means the id exists (the caller takes the bump back);
    not bumped, or bumped without the turn, means a cap could be reached or another create
    of the owner came between.
    """
    t, counter = tables.tasks, tables.counter
    cap = sa.bindparam("cap", type_=sa.BigInteger)
    owner_cap = sa.bindparam("owner_cap", type_=sa.BigInteger)
    turn = sa.bindparam("turn", type_=sa.SmallInteger)
    # The turn row as the statement's snapshot sees it (an alias: not the upsert's target).
    before = counter.alias("before")
    seen = sa.select(before.c.n_rows).where(before.c.id == turn).scalar_subquery()
    mine = (
        sa.select(sa.func.count())
        .select_from(
            sa.select(t.c.task_id)
            .where(t.c.owner == sa.bindparam("owner", type_=sa.Text), active)
            .limit(owner_cap)
            .subquery("mine")
        )
        .scalar_subquery()
    )
    bump = (
        sa.update(counter)
        .where(counter.c.id == 1, sa.or_(cap.is_(None), counter.c.n_rows < cap))
        .values(n_rows=counter.c.n_rows + 1)
        .returning(counter.c.n_rows)
        .cte("bump")
    )
    # After the bump (it selects from it): the counter's row, then the turn's, in the
    # order the transactional path locks them.
    taken = (
        postgresql.insert(counter)
        .from_select(
            ["id", "n_rows"],
            # the snapshot's turn + 1 (1 for a new row): the upsert takes it only if the
            # newest version is still the snapshot's
            sa.select(turn, sa.func.coalesce(seen, 0) + 1)
            .select_from(bump)
            .where(owner_cap.is_not(None), mine < owner_cap),
        )
        .on_conflict_do_update(
            index_elements=[counter.c.id],
            set_={"n_rows": counter.c.n_rows + 1},
            where=counter.c.n_rows + 1 == sa.literal_column("excluded.n_rows"),
        )
        .returning(counter.c.id)
        .cte("turned")
    )
    values = [sa.bindparam(f"v_{name}", type_=t.c[name].type) for name in WRITTEN_COLUMNS]
    insert = (
        postgresql.insert(t)
        .from_select(
            [*WRITTEN_COLUMNS, "row_version"],
            sa.select(*values, sa.literal(0, sa.BigInteger))
            .select_from(bump)
            .where(sa.or_(owner_cap.is_(None), sa.exists(sa.select(taken.c.id)))),
        )
        .on_conflict_do_nothing(index_elements=[t.c.task_id])
        .returning(t.c.task_id)
        .cte("ins")
    )
    count = sa.func.count().label("n")
    statement = sa.select(
        sa.select(count).select_from(bump).scalar_subquery().label("bumped"),
        sa.select(count).select_from(taken).scalar_subquery().label("turned"),
        sa.select(count).select_from(insert).scalar_subquery().label("inserted"),
    )
    return compile_statement(statement, dialect)
