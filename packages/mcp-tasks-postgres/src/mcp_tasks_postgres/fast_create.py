"""Postgres-only statements for ``create`` in two round trips instead of a four-trip transaction.

Under READ COMMITTED a single ``UPDATE`` re-checks its ``WHERE`` on the newest row version
after waiting for a lock, so bumping the namespace's row counter only while it is below the
cap, and inserting only when the bump happened, is atomic in one statement. Only when the
counter says the cap could be reached (it also counts expired rows not reaped yet) must the
exact count run, and that needs a fresh snapshot after the lock: the shared transactional
path of :class:`~mcp_tasks_sql.store.SQLTaskStore` does it.

A create under a per-owner cap counts the owner's active tasks in the statement's snapshot,
taken before the counter's lock. The count is current only if no create committed between
the snapshot and the lock (every insert bumps the counter in its own transaction; other
writes only make tasks inactive): so the bump also requires the counter to be exactly as the
snapshot saw it, which the re-check on the newest version refuses after any other create.
A refused bump leaves the create to the shared transactional path.
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


def bump_and_insert(
    tables: TaskTables, dialect: Dialect, active: sa.ColumnElement[bool]
) -> CompiledSQL:
    """Bump the counter if below ``cap`` (NULL: no cap) and, under ``owner_cap`` (NULL:
    none), if ``owner`` has fewer active tasks (``active``, counted up to the cap) and the
    counter is as the statement's snapshot saw it; insert the row if bumped.

    Returns ``bumped`` and ``inserted`` (0 or 1 each): bumped but not inserted means the id
    exists (the caller takes the bump back); not bumped means a cap could be reached or
    another create came between.
    """
    t, counter = tables.tasks, tables.counter
    cap = sa.bindparam("cap", type_=sa.BigInteger)
    owner_cap = sa.bindparam("owner_cap", type_=sa.BigInteger)
    before = counter.alias("seen")  # an alias: the subquery must not correlate to the UPDATE
    seen = sa.select(before.c.n_rows).where(before.c.id == 1).scalar_subquery()
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
        .where(
            counter.c.id == 1,
            sa.or_(cap.is_(None), counter.c.n_rows < cap),
            sa.or_(owner_cap.is_(None), sa.and_(counter.c.n_rows == seen, mine < owner_cap)),
        )
        .values(n_rows=counter.c.n_rows + 1)
        .returning(counter.c.n_rows)
        .cte("bump")
    )
    values = [sa.bindparam(f"v_{name}", type_=t.c[name].type) for name in WRITTEN_COLUMNS]
    insert = (
        postgresql.insert(t)
        .from_select(
            [*WRITTEN_COLUMNS, "row_version"],
            sa.select(*values, sa.literal(0, sa.BigInteger)).select_from(bump),
        )
        .on_conflict_do_nothing(index_elements=[t.c.task_id])
        .returning(t.c.task_id)
        .cte("ins")
    )
    count = sa.func.count().label("n")
    statement = sa.select(
        sa.select(count).select_from(bump).scalar_subquery().label("bumped"),
        sa.select(count).select_from(insert).scalar_subquery().label("inserted"),
    )
    return compile_statement(statement, dialect)
