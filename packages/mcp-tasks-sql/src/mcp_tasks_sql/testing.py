"""For a SQL dialect's tests: the SQL predicates select exactly what the rules accept.

**Import this module from tests only.** It needs Hypothesis and mcp-tasks-contract (its
record strategies, :mod:`mcp_tasks_contract.records`), test dependencies that mcp-tasks-sql
does not install; no module of the SQL layer or of a backend imports it (``nox -s lint``
checks that with import-linter).

:class:`~mcp_tasks_sql.statements.Predicates` re-state rules of :mod:`mcp_tasks.domain.rules`
in SQL so that the database can select claim candidates, rows to reap and rows under the
caps, and count what ``stats`` counts. :func:`check_predicates` writes random records as
rows into a real database and checks, for each predicate, that ``SELECT task_id … WHERE
predicate`` selects exactly the records the rule accepts, at the same ``now``. A dialect
runs it on a fresh namespace::

    @pytest.mark.anyio
    async def test_sql_predicates_agree_with_the_rules(tmp_path: Path) -> None:
        dialect = MyDialect(tmp_path / "db", table_prefix="p_")
        try:
            await check_predicates(dialect, task_tables(prefix="p_"), MySQLAlchemyDialect())
        finally:
            await dialect.close()

**The clock.** The check evaluates the predicates with ``now`` as a bind parameter it
chooses, whatever the dialect's ``now`` is in production (the injected clock as a bind
parameter on SQLite; the server's clock expression on Postgres). It still checks the
production predicates: :func:`~mcp_tasks_sql.statements.build` and this check both take
them from :func:`~mcp_tasks_sql.statements.predicates`, so every comparison, ``NULL``
test, status list and the ``retention`` arithmetic run as production runs them, on the
same column types, and only the leaf ``now`` differs (a ``BIGINT`` value either way). A
chosen ``now`` is what lets records sit exactly on the edges (a claim, a TTL or a retry
at ``now``, one millisecond before, one after): a server clock moves between writing the
rows and reading them. That a dialect's ``now`` expression is its store clock in epoch
milliseconds is left to the dialect's own tests (for Postgres, the server-clock tests).
"""

from __future__ import annotations

import dataclasses
import secrets
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final, NoReturn

import anyio.from_thread
import anyio.to_thread
import sqlalchemy as sa
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mcp_tasks.domain import rules
from mcp_tasks.domain.models import Claim, StoreOptions, TaskRecord
from mcp_tasks.domain.states import TaskStatus
from mcp_tasks.stores.stats import StoreStats, tally
from mcp_tasks_contract.records import JOB, SPREAD_MS, task_records
from mcp_tasks_sql.connection import Mode, execute, fetch_one
from mcp_tasks_sql.counts import read_stats
from mcp_tasks_sql.statements import Predicates, compile_statement, predicates
from mcp_tasks_sql.store import stats_of, values_of

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from hypothesis.vendor.pretty import RepresentationPrinter
    from sqlalchemy.engine.interfaces import Dialect

    from mcp_tasks_sql.connection import Transaction
    from mcp_tasks_sql.schema import TaskTables
    from mcp_tasks_sql.statements import CompiledSQL
    from mcp_tasks_sql.store import SQLDialect

__all__ = ["EDGE_CASE", "RULES", "PredicateCase", "check_predicates", "predicate_cases"]

#: Each predicate of :class:`~mcp_tasks_sql.statements.Predicates` and the rule it
#: re-states, as ``rule(record, now, terminal_retention_ms)``.
RULES: Final[Mapping[str, Callable[[TaskRecord, int, int], bool]]] = {
    "claimable": lambda record, now, _retention: rules.claimable(record, now),
    "reapable": rules.is_reapable,
    "unexpired": lambda record, now, _retention: rules.counts_toward_cap(record, now),
    "active": lambda record, now, _retention: rules.is_active(record, now),
    "claimed": lambda record, now, _retention: rules.is_claimed(record, now),
    "lease_lapsed": lambda record, now, _retention: rules.lease_lapsed(record, now),
    "retry_due": lambda record, now, _retention: rules.retry_due(record, now),
    "retry_pending": lambda record, now, _retention: rules.retry_pending(record, now),
    "expiring_soon": lambda record, now, _retention: rules.expires_within(
        record, now, rules.EXPIRY_HORIZON_MS
    ),
    "waiting_unclaimed": lambda record, now, _retention: rules.waits_unclaimed(record, now),
}


@dataclass(frozen=True)
class PredicateCase:
    """Records, a ``now`` and a terminal retention: one batch the check writes and selects."""

    now: int
    retention: int
    records: tuple[TaskRecord, ...]

    def __repr__(self) -> str:
        # TaskRecord's repr hides its fields (it is made for logs); a failing case must not.
        rows = "".join(f"\n    {i}: {_describe(r, self)}," for i, r in enumerate(self.records))
        return f"PredicateCase(now={self.now}, retention={self.retention}, records=[{rows}\n])"

    def _repr_pretty_(self, printer: RepresentationPrinter, cycle: bool) -> None:
        printer.text(repr(self))  # how Hypothesis prints a falsifying example


def _describe(record: TaskRecord, case: PredicateCase) -> str:
    """The fields a predicate looks at, instants relative to ``now`` (or the retention edge)."""

    def at(value: int | None, edge: int, name: str) -> str:
        if value is None:
            return "None"
        offset = value - edge
        return f"{name}{offset:+d}" if abs(offset) <= SPREAD_MS else str(value)

    now, retention_edge = case.now, case.now - case.retention
    claim = record.claim
    return (
        f"status={record.status.value} work={'yes' if record.work is not None else 'no'}"
        f" retry_at={at(record.retry_at, now, 'now')}"
        f" expires_at={at(record.expires_at, now, 'now')} ttl_ms={record.ttl_ms}"
        f" claim_expires_at={at(None if claim is None else claim.expires_at, now, 'now')}"
        f" last_updated_at={at(record.last_updated_at, retention_edge, 'now-retention')}"
    )


@st.composite
def predicate_cases(draw: st.DrawFn, max_records: int = 10) -> PredicateCase:
    """Batches of 1 to ``max_records`` records around a ``now`` beyond 32 bits and a
    retention that is 0, 1 ms, an hour or anything up to ``2**40`` ms."""
    now = draw(st.integers(2**31, 2**43))
    retention = draw(st.sampled_from((0, 1, SPREAD_MS)) | st.integers(0, 2**40))
    records = draw(
        st.lists(task_records(now, retention, as_stored=False), min_size=1, max_size=max_records)
    )
    return PredicateCase(now, retention, tuple(_numbered(records)))


def _numbered(records: list[TaskRecord]) -> list[TaskRecord]:
    return [replace(record, task_id=f"r{i}") for i, record in enumerate(records)]


def _edge_case() -> PredicateCase:
    """Every edge the predicates decide on, each on and beside it: run first, every time."""
    now, retention = 1_700_000_000_000, SPREAD_MS
    working, terminal = TaskStatus.WORKING, TaskStatus.COMPLETED
    base = TaskRecord("", None, working, 0, now - 10, now - 10, None, None, work=JOB)
    at_retention = now - retention

    def claim(expires_at: int) -> Claim:
        return Claim("worker", "token", expires_at)

    variants = [
        replace(base, retry_at=now),  # due exactly now: claimable
        replace(base, retry_at=now + 1),  # due in 1 ms: not claimable
        replace(base, ttl_ms=5, expires_at=now),  # expired exactly now: reapable, not counted
        replace(base, ttl_ms=5, expires_at=now + 1),  # expires in 1 ms: claimable, active
        replace(base, claim=claim(now), generation=1),  # claim ended exactly now: claimable
        replace(base, claim=claim(now + 1), generation=1),  # claim live 1 ms more
        replace(base, status=TaskStatus.INPUT_REQUIRED),  # active, claimable
        replace(base, work=None),  # manual: never claimable
        replace(base, status=terminal, last_updated_at=at_retention),  # retained exactly: reap
        replace(base, status=TaskStatus.FAILED, last_updated_at=at_retention + 1),  # kept 1 ms
        replace(base, status=TaskStatus.CANCELLED, last_updated_at=at_retention, ttl_ms=5),
        replace(base, last_updated_at=at_retention),  # not terminal: never reaped by retention
        replace(base, ttl_ms=5, expires_at=now + rules.EXPIRY_HORIZON_MS),  # expiring soon
        replace(base, ttl_ms=5, expires_at=now + rules.EXPIRY_HORIZON_MS + 1),  # not yet
        replace(base, created_at=now - rules.UNCLAIMED_AFTER_MS),  # waited exactly: counted
        replace(base, created_at=now - rules.UNCLAIMED_AFTER_MS + 1),  # 1 ms short of it
    ]
    return PredicateCase(now, retention, tuple(_numbered(variants)))


EDGE_CASE: Final = _edge_case()


def _compile(tables: TaskTables, sql_dialect: Dialect) -> dict[str, CompiledSQL]:
    """Per predicate: ``SELECT task_id … WHERE task_id = :task_id AND <predicate>``."""
    names = {field.name for field in dataclasses.fields(Predicates)}
    if names != set(RULES):
        raise AssertionError(
            f"Predicates and RULES name different predicates: {sorted(names ^ set(RULES))}"
        )
    c = tables.tasks.c
    where = predicates(tables, sa.bindparam("now", type_=sa.BigInteger))
    task = c.task_id == sa.bindparam("task_id", type_=sa.Text)
    return {
        name: compile_statement(sa.select(c.task_id).where(task, getattr(where, name)), sql_dialect)
        for name in RULES
    }


def _counted_stats(tables: TaskTables, sql_dialect: Dialect) -> CompiledSQL:
    """``stats`` from the counters (:func:`mcp_tasks_sql.counts.read_stats`) at ``:now``."""
    now = sa.bindparam("now", type_=sa.BigInteger)
    return compile_statement(read_stats(tables, predicates(tables, now), now), sql_dialect)


#: The caps the counted stats are compared with (they are the store's, not counted).
STATS_OPTIONS: Final = StoreOptions()


class _RollBack(Exception):
    """Not an error: how a batch leaves no rows behind (a session rolls back on any)."""

    def __init__(self, selected: dict[str, frozenset[int]], stats: StoreStats | None) -> None:
        super().__init__()
        self.selected = selected
        self.stats = stats


async def _select(
    dialect: SQLDialect,
    checks: Mapping[str, CompiledSQL],
    case: PredicateCase,
    counted_stats: CompiledSQL | None,
) -> tuple[dict[str, frozenset[int]], StoreStats | None]:
    """Write the case's records as rows in one transaction, select by each predicate at the
    case's ``now`` (and read the counted stats, where the dialect keeps counters), and roll
    back: which records (by index) each predicate selected, and the stats."""
    batch = secrets.token_hex(4)
    ids = [f"predicates-{batch}-{i}" for i in range(len(case.records))]
    values = {"now": case.now, "retention": case.retention}

    def body() -> Transaction[NoReturn]:
        for task_id, record in zip(ids, case.records, strict=True):
            row = values_of(replace(record, task_id=task_id))
            if (yield from execute(dialect.statements.insert, row)) != 1:
                raise AssertionError(f"inserting {task_id} wrote no row")
        selected: dict[str, frozenset[int]] = {}
        for name, select in checks.items():
            hits = []
            for i in ids:
                hits.append((yield from fetch_one(select, {**values, "task_id": i})))
            selected[name] = frozenset(n for n, hit in enumerate(hits) if hit is not None)
        stats = None
        if counted_stats is not None:
            counted = yield from fetch_one(counted_stats, values)
            assert counted is not None  # an aggregate always yields its one row
            stats = stats_of(counted, STATS_OPTIONS)
        raise _RollBack(selected, stats)

    try:
        await dialect.transact(Mode.TRANSACTION, body())
    except _RollBack as done:
        return done.selected, done.stats
    raise AssertionError("unreachable: the batch always rolls back")  # pragma: no cover


def _compare(case: PredicateCase, selected: Mapping[str, frozenset[int]]) -> None:
    wrong: list[str] = []
    for name, rule in RULES.items():
        accepted = {i for i, r in enumerate(case.records) if rule(r, case.now, case.retention)}
        for i in sorted(accepted ^ selected[name]):
            wrong.append(
                f"Predicates.{name} {'missed' if i in accepted else 'wrongly selected'}"
                f" record {i}: {_describe(case.records[i], case)}"
            )
    if wrong:
        raise AssertionError(
            f"SQL predicates disagree with their rules at now={case.now},"
            f" retention={case.retention}:\n  " + "\n  ".join(wrong)
        )


def _compare_stats(case: PredicateCase, stats: StoreStats) -> None:
    """The counted stats against :func:`~mcp_tasks.stores.stats.tally` of the records."""
    expected = tally(case.records, case.now, STATS_OPTIONS)
    wrong = [
        f"{field.name}: counted {getattr(stats, field.name)!r}, "
        f"the rules {getattr(expected, field.name)!r}"
        for field in dataclasses.fields(StoreStats)
        if getattr(stats, field.name) != getattr(expected, field.name)
    ]
    if wrong:
        raise AssertionError(
            f"counted stats disagree with the rules at now={case.now}:\n  "
            + "\n  ".join(wrong)
            + f"\n{case!r}"
        )


async def check_predicates(
    dialect: SQLDialect,
    tables: TaskTables,
    sql_dialect: Dialect,
    *,
    max_examples: int = 75,
    max_records: int = 10,
    hypothesis_settings: settings | None = None,
) -> None:
    """Check every :class:`~mcp_tasks_sql.statements.Predicates` field against its rule
    (:data:`RULES`) on ``dialect``'s real database; raises :class:`AssertionError` with
    the smallest disagreeing batch Hypothesis finds.

    ``dialect`` is open on a fresh namespace whose tables are ``tables``; ``sql_dialect``
    is the SQLAlchemy dialect its statements compile for. The check migrates the
    namespace, then for :data:`EDGE_CASE` and ``max_examples`` generated batches of up
    to ``max_records`` records inserts the rows in one transaction (through
    ``dialect.statements.insert`` and the row codec), selects by each predicate with the
    batch's ``now`` (see the module's note on the clock) and rolls back, so the namespace
    stays empty. Hypothesis runs in a worker thread and calls back into this event loop.
    ``hypothesis_settings`` replaces the defaults (``max_examples``, no deadline).
    """
    await dialect.migrate()
    checks = _compile(tables, sql_dialect)
    counted = None
    if dialect.statements.counted_stats is not None:
        counted = _counted_stats(tables, sql_dialect)
    outcomes = {name: set[bool]() for name in RULES}

    def agrees(case: PredicateCase) -> None:
        selected, stats = anyio.from_thread.run(_select, dialect, checks, case, counted)
        _compare(case, selected)
        if stats is not None:
            _compare_stats(case, stats)
        for name, picked in selected.items():
            outcomes[name].update(i in picked for i in range(len(case.records)))

    config = hypothesis_settings or settings(max_examples=max_examples, deadline=None)
    test = config(example(EDGE_CASE)(given(predicate_cases(max_records))(agrees)))
    await anyio.to_thread.run_sync(test)
    vacuous = sorted(name for name, seen in outcomes.items() if seen != {True, False})
    if vacuous:
        raise AssertionError(f"predicates never both selected and not: {vacuous}")
