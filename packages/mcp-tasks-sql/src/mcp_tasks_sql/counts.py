"""The tasks per status the database keeps counted as it writes (``counts()``, the store
gauges): a table of counters, the triggers that keep it in the statement that writes a
task, and the one statement that reads it.

The counters are rows ``(status, slot, n)``: every task of a status counts in one slot of it
(Postgres: 16 slots by a hash of the id, so writers of one status rarely wait for one row;
SQLite: slot 0, its writers take turns anyway). A trigger adds a task where it is inserted,
moves it where its status changes and takes it away where it is deleted, in the same
statement, so the counters are exact at every commit, whichever writer (a create, a
compare-and-set, a claim, a reap, a dialect's own create) wrote. Where one statement moves
counters of two statuses, it takes their rows in status order: two writers never hold one
each and wait for the other's.

A counter counts rows, expired or not; the read takes the expired ones away (an index range
of ``expires_at``: the rows past their TTL that the reaper has not deleted yet), so the
counts are exact at the store's now and cost what that backlog costs, not the table.
"""

# ruff: noqa: S608 - DDL of quoted identifiers and this module's own text, no caller's value

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import sqlalchemy as sa

from mcp_tasks.domain.states import TaskStatus

if TYPE_CHECKING:
    from sqlalchemy.engine.interfaces import Dialect

    from mcp_tasks_sql.schema import TaskTables

#: How many counter rows each status has on Postgres (a hash of the task id picks one).
POSTGRES_SLOTS: Final = 16


def _names(tables: TaskTables, dialect: Dialect) -> tuple[str, str, str]:
    """The quoted task table, counter table, and the trigger name prefix (unqualified)."""
    quote = dialect.identifier_preparer
    return (
        quote.format_table(tables.tasks),
        quote.format_table(tables.counts),
        f"{tables.tasks.name}_count",
    )


def postgres_triggers(tables: TaskTables, dialect: Dialect) -> list[str]:
    """The functions and triggers that keep the counters on Postgres (replacing any)."""
    tasks, counts, name = _names(tables, dialect)
    schema = tables.tasks.schema
    qualified = f"{dialect.identifier_preparer.quote_schema(schema)}." if schema else ""
    slot = f"hashtext({{row}}.task_id) & {POSTGRES_SLOTS - 1}"
    upsert = (
        f"INSERT INTO {counts} AS k (status, slot, n) {{rows}} "
        "ON CONFLICT (status, slot) DO UPDATE SET n = k.n + excluded.n"
    )
    row_function = f"""CREATE OR REPLACE FUNCTION {qualified}{name}_row() RETURNS trigger
LANGUAGE plpgsql AS $counted$
BEGIN
  IF TG_OP = 'INSERT' THEN
    {upsert.format(rows=f"VALUES (NEW.status, {slot.format(row='NEW')}, 1)")};
  ELSE
    {
        upsert.format(
            rows=(
                f"SELECT s, {slot.format(row='NEW')}, d FROM (VALUES (OLD.status, -1), "
                "(NEW.status, 1)) AS v(s, d) ORDER BY s"
            )
        )
    };
  END IF;
  RETURN NULL;
END
$counted$"""
    gone_function = f"""CREATE OR REPLACE FUNCTION {qualified}{name}_gone() RETURNS trigger
LANGUAGE plpgsql AS $counted$
BEGIN
  {
        upsert.format(
            rows=(
                f"SELECT status, {slot.format(row='gone')}, -count(*) FROM gone "
                "GROUP BY 1, 2 ORDER BY 1, 2"
            )
        )
    };
  RETURN NULL;
END
$counted$"""
    return [
        row_function,
        gone_function,
        f"DROP TRIGGER IF EXISTS {name}_insert ON {tasks}",
        f"CREATE TRIGGER {name}_insert AFTER INSERT ON {tasks} "
        f"FOR EACH ROW EXECUTE FUNCTION {qualified}{name}_row()",
        f"DROP TRIGGER IF EXISTS {name}_update ON {tasks}",
        f"CREATE TRIGGER {name}_update AFTER UPDATE OF status ON {tasks} "
        "FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) "
        f"EXECUTE FUNCTION {qualified}{name}_row()",
        f"DROP TRIGGER IF EXISTS {name}_delete ON {tasks}",
        f"CREATE TRIGGER {name}_delete AFTER DELETE ON {tasks} REFERENCING OLD TABLE AS gone "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {qualified}{name}_gone()",
    ]


def sqlite_triggers(tables: TaskTables, dialect: Dialect) -> list[str]:
    """The triggers that keep the counters on SQLite (slot 0; created if missing)."""
    tasks, counts, name = _names(tables, dialect)

    def add(status: str, delta: int) -> str:
        return (
            f"INSERT INTO {counts} (status, slot, n) VALUES ({status}, 0, {delta}) "
            f"ON CONFLICT (status, slot) DO UPDATE SET n = n + {delta};"
        )

    return [
        f"CREATE TRIGGER IF NOT EXISTS {name}_insert AFTER INSERT ON {tasks} "
        f"BEGIN {add('NEW.status', 1)} END",
        f"CREATE TRIGGER IF NOT EXISTS {name}_update AFTER UPDATE OF status ON {tasks} "
        f"WHEN OLD.status IS NOT NEW.status BEGIN {add('OLD.status', -1)} "
        f"{add('NEW.status', 1)} END",
        f"CREATE TRIGGER IF NOT EXISTS {name}_delete AFTER DELETE ON {tasks} "
        f"BEGIN {add('OLD.status', -1)} END",
    ]


def refill_counts(tables: TaskTables, dialect: Dialect) -> list[str]:
    """The counters made again from the task table (``migrate``, with the triggers in
    place and the table's writers held off: no write falls between the two)."""
    tasks, counts, _ = _names(tables, dialect)
    return [
        f"DELETE FROM {counts}",
        f"INSERT INTO {counts} (status, slot, n) "
        f"SELECT status, 0, count(*) FROM {tasks} WHERE 1 = 1 GROUP BY status",
    ]


def read_counts(tables: TaskTables, now: sa.ColumnElement[int]) -> sa.Select[Any]:
    """One row, one snapshot: ``now_ms``, ``rows`` (every counted row), and per status
    ``kept_<status>`` (its counters) and ``expired_<status>`` (its rows past their TTL, an
    index range of ``expires_at``)."""
    counts, t = tables.counts, tables.tasks
    kept = sa.select(
        sa.func.coalesce(sa.func.sum(counts.c.n), 0).label("rows"),
        *(
            sa.func.coalesce(
                sa.func.sum(sa.case((counts.c.status == status.value, counts.c.n))), 0
            ).label(f"kept_{status.value}")
            for status in TaskStatus
        ),
    ).subquery("kept")
    expired = (
        sa.select(
            *(
                sa.func.count(sa.case((t.c.status == status.value, 1))).label(
                    f"expired_{status.value}"
                )
                for status in TaskStatus
            )
        )
        .where(t.c.expires_at.is_not(None), t.c.expires_at <= now)
        .subquery("expired")
    )
    return sa.select(now.label("now_ms"), kept, expired).select_from(kept.join(expired, sa.true()))
