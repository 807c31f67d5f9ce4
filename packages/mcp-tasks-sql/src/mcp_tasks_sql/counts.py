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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import sqlalchemy as sa

from mcp_tasks.domain.rules import EXPIRY_HORIZON_MS, UNCLAIMED_AFTER_MS
from mcp_tasks.domain.states import TaskStatus
from mcp_tasks.stores.stats import BUSIEST_OWNERS
from mcp_tasks_sql.schema import ACTIVE, CLAIMABLE, is_working, status_in
from mcp_tasks_sql.statements import compile_statement, predicates

if TYPE_CHECKING:
    from sqlalchemy.engine.interfaces import Dialect

    from mcp_tasks_sql.schema import TaskTables
    from mcp_tasks_sql.statements import CompiledSQL, Predicates

#: How many counter rows each status, and each minute of expiry, has on Postgres (a hash of
#: the task id picks one).
POSTGRES_SLOTS: Final = 16
#: The width of an expiry counter (``task_expiry_counts.minute`` = ``expires_at`` // it).
MINUTE_MS: Final = 60_000

#: The statuses an owner's active tasks have (rules.is_active), as SQL text.
_ACTIVE_SQL = "(" + ", ".join(f"'{status.value}'" for status in ACTIVE) + ")"


@dataclass(frozen=True)
class _Names:
    """The quoted tables of a namespace and its trigger name prefix (unqualified)."""

    tasks: str
    counts: str
    owners: str
    expiry: str
    trigger: str


def _names(tables: TaskTables, dialect: Dialect) -> _Names:
    quote = dialect.identifier_preparer
    return _Names(
        tasks=quote.format_table(tables.tasks),
        counts=quote.format_table(tables.counts),
        owners=quote.format_table(tables.owner_counts),
        expiry=quote.format_table(tables.expiry_counts),
        trigger=f"{tables.tasks.name}_count",
    )


def _upserts(names: _Names) -> tuple[str, str, str]:
    """``INSERT … {rows} ON CONFLICT … n = n + excluded.n`` for the three counter tables."""
    add = "DO UPDATE SET n = k.n + excluded.n"
    return (
        f"INSERT INTO {names.counts} AS k (status, work, slot, n) {{rows}} "
        f"ON CONFLICT (status, work, slot) {add}",
        f"INSERT INTO {names.owners} AS k (owner, n) {{rows}} ON CONFLICT (owner) {add}",
        f"INSERT INTO {names.expiry} AS k (minute, slot, n) {{rows}} "
        f"ON CONFLICT (minute, slot) {add}",
    )


def postgres_triggers(tables: TaskTables, dialect: Dialect) -> list[str]:
    """The functions and triggers that keep the counters on Postgres (replacing any).

    One row trigger for inserts and for updates that change a status or an expiry minute,
    one statement trigger for deletes (a reap: its rows grouped). Counter rows are taken
    in one order everywhere: status counters, then owners, then expiry minutes, each in key
    order. A counter of an owner or a minute that falls to 0 is deleted: the owners with
    active tasks and the minutes to come are all they hold."""
    names = _names(tables, dialect)
    schema = tables.tasks.schema
    qualified = f"{dialect.identifier_preparer.quote_schema(schema)}." if schema else ""
    counts, owners, expiry = _upserts(names)
    mask = POSTGRES_SLOTS - 1
    new_slot, gone_slot = f"hashtext(NEW.task_id) & {mask}", f"hashtext(gone.task_id) & {mask}"
    row_function = f"""CREATE OR REPLACE FUNCTION {qualified}{names.trigger}_row() RETURNS trigger
LANGUAGE plpgsql AS $counted$
BEGIN
  IF TG_OP = 'INSERT' THEN
    {counts.format(rows=f"VALUES (NEW.status, NEW.has_work::int, {new_slot}, 1)")};
    IF NEW.owner IS NOT NULL AND NEW.status IN {_ACTIVE_SQL} THEN
      {owners.format(rows="VALUES (NEW.owner, 1)")};
    END IF;
    IF NEW.expires_at IS NOT NULL THEN
      {expiry.format(rows=f"VALUES (NEW.expires_at / {MINUTE_MS}, {new_slot}, 1)")};
    END IF;
    RETURN NULL;
  END IF;
  IF OLD.status IS DISTINCT FROM NEW.status THEN
    {
        counts.format(
            rows=(
                f"SELECT s, NEW.has_work::int, {new_slot}, d FROM (VALUES (OLD.status, -1), "
                "(NEW.status, 1)) AS v(s, d) ORDER BY s"
            )
        )
    };
    IF NEW.owner IS NOT NULL
        AND (OLD.status IN {_ACTIVE_SQL}) <> (NEW.status IN {_ACTIVE_SQL}) THEN
      {
        owners.format(
            rows=f"VALUES (NEW.owner, CASE WHEN NEW.status IN {_ACTIVE_SQL} THEN 1 ELSE -1 END)"
        )
    };
      DELETE FROM {names.owners} WHERE owner = NEW.owner AND n = 0;
    END IF;
  END IF;
  IF OLD.expires_at / {MINUTE_MS} IS DISTINCT FROM NEW.expires_at / {MINUTE_MS} THEN
    {
        expiry.format(
            rows=(
                f"SELECT m, {new_slot}, d FROM (VALUES (OLD.expires_at / {MINUTE_MS}, -1), "
                f"(NEW.expires_at / {MINUTE_MS}, 1)) AS v(m, d) WHERE m IS NOT NULL ORDER BY m"
            )
        )
    };
    DELETE FROM {names.expiry}
      WHERE minute = OLD.expires_at / {MINUTE_MS} AND slot = {new_slot} AND n = 0;
  END IF;
  RETURN NULL;
END
$counted$"""
    gone_function = f"""CREATE OR REPLACE FUNCTION {qualified}{names.trigger}_gone() RETURNS trigger
LANGUAGE plpgsql AS $counted$
BEGIN
  {
        counts.format(
            rows=(
                f"SELECT status, has_work::int, {gone_slot}, -count(*) FROM gone "
                "GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
            )
        )
    };
  {
        owners.format(
            rows=(
                "SELECT owner, -count(*) FROM gone WHERE owner IS NOT NULL "
                f"AND status IN {_ACTIVE_SQL} GROUP BY 1 ORDER BY 1"
            )
        )
    };
  {
        expiry.format(
            rows=(
                f"SELECT expires_at / {MINUTE_MS}, {gone_slot}, -count(*) FROM gone "
                "WHERE expires_at IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2"
            )
        )
    };
  DELETE FROM {names.owners} AS o USING gone WHERE o.owner = gone.owner AND o.n = 0;
  DELETE FROM {names.expiry} AS e USING gone
    WHERE e.minute = gone.expires_at / {MINUTE_MS} AND e.slot = {gone_slot} AND e.n = 0;
  RETURN NULL;
END
$counted$"""
    tasks, name = names.tasks, names.trigger
    return [
        row_function,
        gone_function,
        f"DROP TRIGGER IF EXISTS {name}_insert ON {tasks}",
        f"CREATE TRIGGER {name}_insert AFTER INSERT ON {tasks} "
        f"FOR EACH ROW EXECUTE FUNCTION {qualified}{name}_row()",
        f"DROP TRIGGER IF EXISTS {name}_update ON {tasks}",
        f"CREATE TRIGGER {name}_update AFTER UPDATE OF status, expires_at ON {tasks} "
        "FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status "
        f"OR OLD.expires_at / {MINUTE_MS} IS DISTINCT FROM NEW.expires_at / {MINUTE_MS}) "
        f"EXECUTE FUNCTION {qualified}{name}_row()",
        f"DROP TRIGGER IF EXISTS {name}_delete ON {tasks}",
        f"CREATE TRIGGER {name}_delete AFTER DELETE ON {tasks} REFERENCING OLD TABLE AS gone "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {qualified}{name}_gone()",
    ]


def sqlite_triggers(tables: TaskTables, dialect: Dialect) -> list[str]:
    """The triggers that keep the counters on SQLite (slot 0), made anew (dropped first)."""
    names = _names(tables, dialect)
    counts, owners, expiry = (
        upsert.replace(" AS k", "").replace("k.n", "n") for upsert in _upserts(names)
    )

    def status(row: str, delta: int) -> str:
        return counts.format(rows=f"SELECT {row}.status, {row}.has_work, 0, {delta} WHERE 1") + ";"

    def owner(row: str, delta: str, when: str) -> str:
        return owners.format(rows=f"SELECT {row}.owner, {delta} WHERE {when}") + ";"

    def minute(row: str, delta: int) -> str:
        rows = (
            f"SELECT {row}.expires_at / {MINUTE_MS}, 0, {delta} WHERE {row}.expires_at IS NOT NULL"
        )
        return expiry.format(rows=rows) + ";"

    emptied = f"DELETE FROM {names.expiry} WHERE minute = OLD.expires_at / {MINUTE_MS} AND n = 0;"
    left = f"DELETE FROM {names.owners} WHERE owner = OLD.owner AND n = 0;"
    owned = "{row}.owner IS NOT NULL AND {row}.status IN " + _ACTIVE_SQL
    tasks, name = names.tasks, names.trigger
    return [
        *(
            f"DROP TRIGGER IF EXISTS {name}_{kind}"
            for kind in ("insert", "update", "expiry", "delete")
        ),
        f"CREATE TRIGGER {name}_insert AFTER INSERT ON {tasks} BEGIN {status('NEW', 1)} "
        f"{owner('NEW', '1', owned.format(row='NEW'))} {minute('NEW', 1)} END",
        f"CREATE TRIGGER {name}_update AFTER UPDATE OF status ON {tasks} "
        f"WHEN OLD.status IS NOT NEW.status BEGIN {status('OLD', -1)} {status('NEW', 1)} "
        + owner(
            "NEW",
            f"CASE WHEN NEW.status IN {_ACTIVE_SQL} THEN 1 ELSE -1 END",
            f"NEW.owner IS NOT NULL AND (OLD.status IN {_ACTIVE_SQL}) "
            f"<> (NEW.status IN {_ACTIVE_SQL})",
        )
        + f" {left} END",
        f"CREATE TRIGGER {name}_expiry AFTER UPDATE OF expires_at ON {tasks} "
        f"WHEN OLD.expires_at / {MINUTE_MS} IS NOT NEW.expires_at / {MINUTE_MS} "
        f"BEGIN {minute('OLD', -1)} {minute('NEW', 1)} {emptied} END",
        f"CREATE TRIGGER {name}_delete AFTER DELETE ON {tasks} BEGIN {status('OLD', -1)} "
        f"{owner('OLD', '-1', owned.format(row='OLD'))} {left} {minute('OLD', -1)} {emptied} END",
    ]


def refill_counts(tables: TaskTables, dialect: Dialect) -> list[str]:
    """The counters made again from the task table (``migrate``, with the triggers in
    place and the table's writers held off: no write falls between the two)."""
    names = _names(tables, dialect)
    tasks = names.tasks
    return [
        f"DELETE FROM {names.counts}",
        f"INSERT INTO {names.counts} (status, work, slot, n) SELECT status, "
        f"CASE WHEN has_work THEN 1 ELSE 0 END, 0, count(*) FROM {tasks} GROUP BY 1, 2",
        f"DELETE FROM {names.owners}",
        f"INSERT INTO {names.owners} (owner, n) SELECT owner, count(*) FROM {tasks} "
        f"WHERE owner IS NOT NULL AND status IN {_ACTIVE_SQL} GROUP BY owner",
        f"DELETE FROM {names.expiry}",
        f"INSERT INTO {names.expiry} (minute, slot, n) SELECT expires_at / {MINUTE_MS}, 0, "
        f"count(*) FROM {tasks} WHERE expires_at IS NOT NULL GROUP BY 1",
    ]


def read_counts(tables: TaskTables, now: sa.ColumnElement[int]) -> sa.Select[Any]:
    """One row, one snapshot: ``now_ms``, ``rows`` (every counted row), and per status
    ``kept_<status>`` (its counters) and ``expired_<status>`` (its rows past their TTL, an
    index range of ``expires_at``)."""
    t = tables.tasks
    past_ttl = (t.c.expires_at.is_not(None), t.c.expires_at <= now)
    kept, expired = _kept(tables), _expired(t, *past_ttl, name="expired")
    return sa.select(now.label("now_ms"), kept, expired).select_from(kept.join(expired, sa.true()))


def _kept(tables: TaskTables) -> sa.Subquery:
    counts = tables.counts
    return sa.select(
        sa.func.coalesce(sa.func.sum(counts.c.n), 0).label("rows"),
        *(
            sa.func.coalesce(
                sa.func.sum(sa.case((counts.c.status == status.value, counts.c.n))), 0
            ).label(f"kept_{status.value}")
            for status in TaskStatus
        ),
    ).subquery("kept")


def _expired(rows: sa.FromClause, *where: sa.ColumnElement[bool], name: str) -> sa.Subquery:
    """``expired_<status>`` per status: the rows of ``rows`` (those ``where`` keeps) that
    have it, counted."""
    return (
        sa.select(
            *(
                sa.func.count(sa.case((rows.c.status == status.value, 1))).label(
                    f"expired_{status.value}"
                )
                for status in TaskStatus
            )
        )
        .select_from(rows)
        .where(*where)
        .subquery(name)
    )


def read_stats(tables: TaskTables, where: Predicates, now: sa.ColumnElement[int]) -> sa.Select[Any]:
    """``stats`` from the counters, one row, one snapshot, with the columns of
    :func:`mcp_tasks_sql.statements.stats`. What the counters cannot know, because it moves
    with the clock alone, is read from the few rows it concerns, each set read once by the
    one index that holds it (a materialized ``WITH``, so that no planner reads it another
    way): the live tasks with a lease (``leases_ix``), with a retry (``retries_ix``), the
    rows past their TTL the reaper has not deleted yet (``expires_ix``), the claimable
    tasks created within the unclaimed threshold (``claim_ix``), the rows of the horizon's
    last minute expiring beyond it, the oldest working task. Its cost is
    theirs and the number of owners', not the table's."""
    t, c = tables.tasks, tables.tasks.c
    counts, owners, expiry = tables.counts, tables.owner_counts, tables.expiry_counts

    def constant(value: int) -> sa.ColumnElement[int]:  # inlined: a plan knows it
        return sa.literal_column(str(value), sa.BigInteger)

    def rows_of(name: str, *conditions: sa.ColumnElement[bool]) -> sa.CTE:
        columns = (c.task_id, c.owner, c.status, c.has_work, c.created_at, c.expires_at)
        chosen = sa.select(*columns, c.retry_at, c.claim_expires_at).where(*conditions)
        return chosen.cte(name).prefix_with("MATERIALIZED")

    def number(source: sa.FromClause, *conditions: sa.ColumnElement[bool]) -> Any:
        return sa.select(sa.func.count()).select_from(source).where(*conditions).scalar_subquery()

    live = status_in(c.status, ACTIVE)
    leased = rows_of("leased", live, c.claim_expires_at.is_not(None))
    retrying = rows_of("retrying", live, c.retry_at.is_not(None))
    expired = rows_of("expired", c.expires_at.is_not(None), c.expires_at <= now)

    def unexpired(rows: sa.CTE) -> sa.ColumnElement[bool]:
        return sa.or_(rows.c.expires_at.is_(None), rows.c.expires_at > now)

    def claimable(rows: sa.CTE) -> sa.ColumnElement[bool]:  # rules.claimable
        return sa.and_(
            status_in(rows.c.status, CLAIMABLE),
            rows.c.has_work,
            sa.or_(rows.c.retry_at.is_(None), rows.c.retry_at <= now),
            unexpired(rows),
            sa.or_(rows.c.claim_expires_at.is_(None), rows.c.claim_expires_at <= now),
        )

    # rules.waits_unclaimed: every claimable task with work the counters hold, less the
    # ones created within the threshold, and the older ones past their TTL, waiting for a
    # retry or under a live lease (the claimable statuses are active ones)
    before = now - constant(UNCLAIMED_AFTER_MS)

    def old_queued(rows: sa.CTE) -> sa.ColumnElement[bool]:
        return sa.and_(
            rows.c.has_work, status_in(rows.c.status, CLAIMABLE), rows.c.created_at <= before
        )

    blocked = sa.union(
        sa.select(expired.c.task_id).where(old_queued(expired)),
        sa.select(retrying.c.task_id).where(old_queued(retrying), retrying.c.retry_at > now),
        sa.select(leased.c.task_id).where(old_queued(leased), leased.c.claim_expires_at > now),
    ).subquery("blocked")
    with_work = (
        sa.select(sa.func.coalesce(sa.func.sum(counts.c.n), 0))
        .where(status_in(counts.c.status, CLAIMABLE), counts.c.work == constant(1))
        .scalar_subquery()
    )
    recent = number(t, c.has_work, status_in(c.status, CLAIMABLE), c.created_at > before)
    waiting = with_work - recent - number(blocked)
    # rules.expires_within: the counters of the minutes from now's to the horizon's, less
    # the rows of now's minute already past their TTL (not reaped yet) and those of the
    # horizon's minute beyond it (a longer TTL, or a task created since now): both few
    minute = constant(MINUTE_MS)
    horizon_end = now + constant(EXPIRY_HORIZON_MS)
    first, last = now // minute, horizon_end // minute
    minutes = (
        sa.select(sa.func.coalesce(sa.func.sum(expiry.c.n), 0))
        .where(expiry.c.minute >= first, expiry.c.minute <= last)
        .scalar_subquery()
    )
    soon = (
        minutes
        - number(expired, expired.c.expires_at >= first * minute)
        - number(t, c.expires_at > horizon_end, c.expires_at < (last + constant(1)) * minute)
    )
    oldest = (
        sa.select(c.created_at)
        .where(is_working(c.status), where.unexpired)
        .order_by(c.created_at)
        .limit(constant(1))
        .scalar_subquery()
    )
    # the owners: their counters, less their active tasks past their TTL
    lapsed_of = (
        sa.select(expired.c.owner, sa.func.count().label("m"))
        .where(expired.c.owner.is_not(None), status_in(expired.c.status, ACTIVE))
        .group_by(expired.c.owner)
        .subquery("lapsed_of")
    )
    corrected = (
        sa.select((owners.c.n - sa.func.coalesce(lapsed_of.c.m, 0)).label("n"))
        .select_from(owners.outerjoin(lapsed_of, lapsed_of.c.owner == owners.c.owner))
        .where(owners.c.n > constant(0))
        .subquery("corrected")
    )
    ranked = (
        sa.select(
            corrected.c.n,
            sa.func.row_number().over(order_by=corrected.c.n.desc()).label("place"),
        )
        .where(corrected.c.n > constant(0))
        .subquery("ranked")
    )
    per_owner = sa.select(
        sa.func.count().label("owners"),
        *(
            sa.func.max(sa.case((ranked.c.place == constant(place), ranked.c.n))).label(
                f"busiest_{place}"
            )
            for place in range(1, BUSIEST_OWNERS + 1)
        ),
    ).subquery("per_owner")
    kept = _kept(tables)
    gone = _expired(expired, name="gone")
    integer = sa.BigInteger
    figures: list[sa.ColumnElement[Any]] = [
        now.label("now_ms"),
        sa.cast(kept.c.rows, integer).label("rows"),
        *(
            sa.cast(kept.c[f"kept_{s.value}"] - gone.c[f"expired_{s.value}"], integer).label(
                f"status_{s.value}"
            )
            for s in TaskStatus
        ),
        number(leased, leased.c.claim_expires_at > now, unexpired(leased)).label("claimed"),
        number(leased, leased.c.claim_expires_at <= now, claimable(leased)).label("lease_lapsed"),
        number(retrying, retrying.c.retry_at <= now, claimable(retrying)).label("retry_due"),
        number(retrying, retrying.c.retry_at > now, unexpired(retrying)).label("retry_pending"),
        sa.cast(soon, integer).label("expiring_soon"),
        sa.cast(waiting, integer).label("waiting_unclaimed"),
        oldest.label("oldest_working_created_at"),
        per_owner.c.owners,
        *(per_owner.c[f"busiest_{place}"] for place in range(1, BUSIEST_OWNERS + 1)),
    ]
    return sa.select(*figures).select_from(kept.join(gone, sa.true()).join(per_owner, sa.true()))


def counted_statements(
    tables: TaskTables, dialect: Dialect, now: sa.ColumnElement[int]
) -> dict[str, CompiledSQL]:
    """The statements that read the counters (``Statements.counts`` and
    ``Statements.counted_stats``), for a dialect whose migration installs the triggers."""
    where = predicates(tables, now)
    return {
        "counts": compile_statement(read_counts(tables, now), dialect),
        "counted_stats": compile_statement(read_stats(tables, where, now), dialect),
    }
