"""Seeding a large table fast: copies, inside the database, of rows the store wrote.

A million tasks created one by one through a store take many minutes (a transaction or a
script each). Where the database can copy rows in bulk, the section creates a set of tasks
through the store (the templates) and then inserts copies of their rows under new ids, many
thousand to a statement: Postgres ``INSERT … SELECT`` from ``unnest`` of the id pairs,
SQLite ``executemany`` of one ``INSERT … SELECT``. Every column is copied as the store wrote
it; the triggers that keep the per-status counters run for each copy as for a create, and
the row counter (the row cap's) is raised by the rows added in the same transaction, so
``counts()`` and ``stats()`` stay exact. On Postgres each copy is followed by what
autovacuum does for a table that grows one create at a time (``ANALYZE`` of the tasks,
``VACUUM`` of the counters), so that the operations are measured on the table a server
that grew to the size would have, not on one the planner has not seen yet. Stores without
such a path (Redis, MongoDB) are seeded through the store, many creates in flight
(:data:`None` from :func:`copier`).
"""

from __future__ import annotations

import asyncio
import sqlite3
from typing import TYPE_CHECKING

from mcp_tasks_sql.schema import task_tables

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from mcp_tasks import Store


def copier(store: Store) -> Callable[[Sequence[tuple[str, str]]], Awaitable[None]] | None:
    """The bulk copy of ``store``'s rows, or ``None`` where it has none here: ``copy(pairs)``
    inserts, for each ``(new_id, template_id)``, a copy of the template's row."""
    # Imported here: each is the optional package of its store.
    try:
        from mcp_tasks_postgres import PostgresTaskStore  # noqa: PLC0415
    except ImportError:  # pragma: no cover - the workspace installs every store
        PostgresTaskStore = None  # type: ignore[assignment,misc]  # noqa: N806
    try:
        from mcp_tasks_sqlite import SQLiteTaskStore  # noqa: PLC0415
    except ImportError:  # pragma: no cover
        SQLiteTaskStore = None  # type: ignore[assignment,misc]  # noqa: N806
    if PostgresTaskStore is not None and isinstance(store, PostgresTaskStore):
        return _postgres(store.dialect.connect_url, store.schema)
    if SQLiteTaskStore is not None and isinstance(store, SQLiteTaskStore):
        return _sqlite(str(store.path), store.dialect.table_prefix)
    return None


def _postgres(url: str, schema: str) -> Callable[[Sequence[tuple[str, str]]], Awaitable[None]]:
    tables = task_tables(schema=schema)
    tasks, counter = f'"{schema}"."{tables.tasks.name}"', f'"{schema}"."{tables.counter.name}"'
    others = [c.name for c in tables.tasks.columns if c.name != "task_id"]
    listed = ", ".join(f'"{c}"' for c in others)
    insert = (
        f'INSERT INTO {tasks} ("task_id", {listed}) '
        f"SELECT s.new_id, {', '.join(f't.{c}' for c in others)} FROM {tasks} t "
        "JOIN unnest($1::text[], $2::text[]) AS s(new_id, old_id) ON t.task_id = s.old_id"
    )
    bump = f"UPDATE {counter} SET n_rows = n_rows + $1 WHERE id = 1"
    counters = ", ".join(
        f'"{schema}"."{table.name}"'
        for table in (tables.counter, tables.counts, tables.owner_counts, tables.expiry_counts)
    )

    async def copy(pairs: Sequence[tuple[str, str]]) -> None:
        import asyncpg  # noqa: PLC0415 (the Postgres store's driver)

        conn = await asyncpg.connect(url)
        try:
            async with conn.transaction():
                done = await conn.execute(insert, [p[0] for p in pairs], [p[1] for p in pairs])
                if done != f"INSERT 0 {len(pairs)}":
                    raise RuntimeError(f"copied {done}, not {len(pairs)} rows")
                await conn.execute(bump, len(pairs))
            # What autovacuum does within a minute for a table that grows one create at a
            # time: the planner's statistics of the grown table, and the counter rows'
            # versions vacuumed (a create's own transaction leaves one, pruned in place;
            # this copy's one transaction left one per row copied).
            await conn.execute(f"ANALYZE {tasks}")
            await conn.execute(f"VACUUM {counters}")
        finally:
            await conn.close()

    return copy


def _sqlite(path: str, prefix: str) -> Callable[[Sequence[tuple[str, str]]], Awaitable[None]]:
    tables = task_tables(prefix=prefix)
    tasks, counter = f'"{tables.tasks.name}"', f'"{tables.counter.name}"'
    others = ", ".join(f'"{c.name}"' for c in tables.tasks.columns if c.name != "task_id")
    insert = f'INSERT INTO {tasks} ("task_id", {others}) SELECT ?, {others} FROM {tasks} '
    insert += 'WHERE "task_id" = ?'
    bump = f"UPDATE {counter} SET n_rows = n_rows + ? WHERE id = 1"

    def copy_now(pairs: Sequence[tuple[str, str]]) -> None:
        conn = sqlite3.connect(path, timeout=30)
        try:
            with conn:
                before = conn.total_changes
                conn.executemany(insert, pairs)
                if conn.total_changes - before < len(pairs):  # the triggers' changes count too
                    raise RuntimeError("a template row was missing")
                conn.execute(bump, (len(pairs),))
        finally:
            conn.close()

    async def copy(pairs: Sequence[tuple[str, str]]) -> None:
        await asyncio.to_thread(copy_now, list(pairs))

    return copy
