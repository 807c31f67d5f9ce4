"""The store logic every SQL dialect shares: read, apply the pure rules, compare-and-set.

A :class:`SQLDialect` supplies connections, the compiled statements and how its clock
reaches them; everything the Store contract decides is computed by
:mod:`mcp_tasks.domain.rules` here, never re-derived per dialect.
"""

from __future__ import annotations

import asyncio
from enum import Enum
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, Self, TypeVar

from mcp_tasks.domain import rules
from mcp_tasks.domain.errors import (
    DuplicateTaskId,
    OwnerTaskLimitReached,
    StoreNotMigrated,
    StoreUnavailable,
    TaskLimitReached,
)
from mcp_tasks.domain.models import Claimed, Lease, StoreOptions
from mcp_tasks.domain.states import TaskStatus
from mcp_tasks.stores.kit import CloseGuard, within
from mcp_tasks.stores.location import StoreLocation
from mcp_tasks.stores.read_modify_write import ReadModifyWrite
from mcp_tasks.stores.stats import BUSIEST_OWNERS, StoreCounts, counts_of, from_counts
from mcp_tasks_sql.codec import RowDecoder, from_row, to_row
from mcp_tasks_sql.connection import Mode, Row, Transaction, execute, fetch_one
from mcp_tasks_sql.schema import owner_turn_row

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from mcp_tasks.domain.models import NewTask, TaskRecord
    from mcp_tasks.domain.rules import OwnerArg
    from mcp_tasks.stores.abilities import Rewrite
    from mcp_tasks.stores.doctor_rows import DiagnosisRow
    from mcp_tasks.stores.stats import StoreStats
    from mcp_tasks_sql.statements import CompiledSQL, Statements

R = TypeVar("R")


class _LostRace(Enum):
    """A transaction's answer when its compare-and-set lost to another writer: run again."""

    LOST = "lost"


def stats_of(row: Row, options: StoreOptions) -> StoreStats:
    """The stats a ``stats`` or ``counted_stats`` row holds (its columns:
    :func:`mcp_tasks_sql.statements.stats`), with the store's caps."""
    busiest = (row[f"busiest_{place}"] for place in range(1, BUSIEST_OWNERS + 1))
    return from_counts(
        row,
        now=row["now_ms"],
        owners=row["owners"],
        busiest_owners=(n for n in busiest if n is not None),
        options=options,
    )


def values_of(record: TaskRecord) -> dict[str, Any]:
    """A record as the ``v_…`` parameters of the insert and compare-and-set statements."""
    return {f"v_{name}": value for name, value in to_row(record).items()}


def record_of(row: Row | None) -> TaskRecord | None:
    """The record in a row of the ``read`` statement (its task columns are NULL when absent)."""
    if row is None or row["task_id"] is None:
        return None
    return from_row(row)


class SQLDialect(Protocol):
    """What a SQL database brings to :class:`SQLTaskStore`: connections, the compiled
    statements of its namespace, its clock and its DDL. The store decides everything else.

    ``mcp-tasks-sqlite`` and ``mcp-tasks-postgres`` are the two implementations; a dialect
    for another database implements this and runs the contract suite.
    """

    @property
    def url(self) -> str:
        """The URL that opens this namespace again (a password masked)."""
        ...

    @property
    def statements(self) -> Statements:
        """The compiled statements of this namespace (:func:`~mcp_tasks_sql.statements.build`)."""
        ...

    async def transact(self, mode: Mode, body: Transaction[R]) -> R:
        """Run ``body``'s statements on one connection as ``mode`` says and return its
        result; commit on success, roll back when ``body`` (or the driver) raises, and
        raise driver failures (and use after :meth:`close`) as :class:`StoreUnavailable`.

        A dialect on an async driver awaits each statement
        (:func:`~mcp_tasks_sql.connection.run_on`); one whose driver runs on a thread runs
        the whole body there in one call, so a write costs one hop, not one per statement.
        Either way the body is the store's: the dialect runs statements, it decides nothing."""
        ...

    async def fetch_one(self, sql: CompiledSQL, values: Mapping[str, Any]) -> Row | None:
        """``sql``'s first row, one statement outside any transaction (what ``get`` needs,
        by the shortest path the dialect has); failures as in :meth:`transact`."""
        ...

    def with_now(self, values: dict[str, Any]) -> dict[str, Any]:
        """``values`` plus whatever the statements need to know the store's clock."""
        ...

    async def migrate(self) -> bool:
        """Create the schema, tables, indexes and counter row if missing (idempotent).
        Returns whether the task table had to be created."""
        ...

    async def diagnose(self) -> list[DiagnosisRow]:
        """``mcp-tasks doctor``'s checks of this database: the server or library, its
        durability settings, the namespace's schema (``mcp_tasks_sql.schema_check.schema_row``)
        and, where the server keeps the time, its clock.

        Raises:
            StoreUnavailable: the database cannot be reached."""
        ...

    async def create(self, task: NewTask, options: StoreOptions) -> TaskRecord | None:
        """A dialect's own faster ``create``, or ``None`` to run the shared one.

        Raises what :meth:`SQLTaskStore.create` raises."""
        ...

    async def close(self) -> None:
        """Release connections; every later call raises StoreUnavailable. Idempotent."""
        ...


class SQLTaskStore(ReadModifyWrite):
    """A :class:`~mcp_tasks.stores.protocol.Store` on a SQL database, built from a dialect."""

    options: StoreOptions

    def __init__(
        self,
        dialect: SQLDialect,
        options: StoreOptions | None = None,
        *,
        location: StoreLocation | None = None,
    ) -> None:
        self.dialect = dialect
        self.options = options or StoreOptions()
        self._location = location
        self._sql = dialect.statements
        self._decode = RowDecoder()
        self._with_now = dialect.with_now
        self._ready = False
        self._ready_lock = asyncio.Lock()
        self._guard = CloseGuard()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self.url!r}, max_rows={self.options.max_rows})"

    # Every operation within the store's bound: a transaction is several statements, each
    # under the driver's own timeout, and a queued SQLite write waits for those before it.
    async def _transact(self, mode: Mode, body: Transaction[R]) -> R:
        with within(self.options.timeout_ms):
            return await self.dialect.transact(mode, body)

    async def _fetch_one(self, sql: CompiledSQL, values: Mapping[str, Any]) -> Row | None:
        with within(self.options.timeout_ms):
            return await self.dialect.fetch_one(sql, values)

    @property
    def url(self) -> str:
        """The URL that opens this store's namespace again (a password masked)."""
        return self.dialect.url

    @property
    def location(self) -> StoreLocation:
        """Where the store is: the location it was opened at, else its dialect's URL."""
        if self._location is None:
            self._location = StoreLocation.read(self.dialect.url)
        return self._location

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Release the store's connections. Idempotent."""
        self._guard.close()
        await self.dialect.close()

    # --- schema ------------------------------------------------------------------------

    async def migrate(self) -> bool:
        """Create the tables and indexes if they do not exist; safe to run any number of
        times and from several processes at once (``mcp-tasks migrate`` calls this).
        Returns whether the task table had to be created (``False``: it was there)."""
        self._guard.check()
        async with self._ready_lock:
            created = await self.dialect.migrate()
            self._ready = True
            return created

    async def diagnose(self) -> list[DiagnosisRow]:
        """``mcp-tasks doctor``'s checks of this store's database (its dialect's)."""
        self._guard.check()
        return await self.dialect.diagnose()

    async def stats(self) -> StoreStats:
        """Aggregates of the namespace's tasks for ``mcp-tasks stats``: one read statement,
        one snapshot. Where the dialect keeps counters, ``Statements.counted_stats``: the
        counters, and the few rows whose figure moves with the clock alone (its cost does
        not grow with the table); elsewhere ``Statements.stats``, counting by
        :class:`~mcp_tasks_sql.statements.Predicates`, a scan of the task table. Writes
        nothing, so it does not migrate.

        Raises:
            StoreNotMigrated: the namespace has no tables (a ``StoreUnavailable``).
            StoreUnavailable: the database cannot be reached."""
        self._guard.check()
        row = await self._aggregate(self._sql.counted_stats or self._sql.stats)
        return stats_of(row, self.options)

    async def _aggregate(self, sql: CompiledSQL) -> Row:
        """The one row of an aggregate read (``stats``, ``counts``) at the store's now.

        Raises:
            StoreNotMigrated: the namespace has no tables (a ``StoreUnavailable``).
            StoreUnavailable: the database cannot be reached."""
        try:
            row = await self._fetch_one(sql, self._with_now({}))
        except StoreUnavailable as error:
            missing = await self._schema_missing()
            if missing is not None:
                raise StoreNotMigrated(missing) from error
            raise
        assert row is not None  # an aggregate always yields its one row
        return row

    async def counts(self) -> StoreCounts:
        """Rows and unexpired tasks per status (the store gauges): where the dialect keeps
        counters (``Statements.counts``), one read of them and of the expired rows not
        reaped yet, whatever the table's size; elsewhere :meth:`stats`' figures.

        Raises:
            StoreNotMigrated: the namespace has no tables (a ``StoreUnavailable``).
            StoreUnavailable: the database cannot be reached."""
        self._guard.check()
        if self._sql.counts is None:
            return counts_of(await self.stats())
        row = await self._aggregate(self._sql.counts)
        by_status = {
            status: int(row[f"kept_{status.value}"]) - int(row[f"expired_{status.value}"])
            for status in TaskStatus
        }
        return StoreCounts(
            now=row["now_ms"],
            rows=int(row["rows"]),
            by_status=by_status,
            max_rows=self.options.max_rows,
        )

    async def _schema_missing(self) -> str | None:
        """What the namespace's schema lacks (its doctor row's words), or ``None``: it is
        whole, or the database cannot say. Asked only after a read failed, to tell
        "never migrated" from "unreachable"."""
        try:
            rows = await self.dialect.diagnose()
        except StoreUnavailable:
            return None
        return next(
            (detail for name, level, detail in rows if name == "schema" and level == "fail"), None
        )

    async def _ensure_ready(self) -> None:
        self._guard.check()
        if not self._ready:
            # Bounded with the wait for the lock: calls queued behind a migration that
            # cannot reach the database must not wait for each other's attempts in turn.
            with within(self.options.timeout_ms):
                async with self._ready_lock:
                    if not self._ready:
                        await self.dialect.migrate()
                        self._ready = True

    # --- the Store operations -------------------------------------------------------------

    async def create(self, task: NewTask) -> TaskRecord:
        await self._ensure_ready()
        with within(self.options.timeout_ms):
            fast = await self.dialect.create(task, self.options)
        if fast is not None:
            return fast
        return await self._transact(Mode.TRANSACTION, self._create(task))

    def _create(self, task: NewTask) -> Transaction[TaskRecord]:
        sql, options = self._sql, self.options
        # Locks the namespace's counter row until commit: creates serialise here, so the
        # caps are checked and the row inserted atomically under READ COMMITTED.
        bumped = yield from self._bump_rows(1)
        if bumped is None:
            raise StoreUnavailable("The task table's row counter is missing; run migrate")
        rows_before, now = bumped["n_rows"] - 1, bumped["now_ms"]
        cap = options.max_rows
        # The counter includes expired rows not reaped yet: count exactly only when it
        # says the cap could be reached (as the memory store does).
        if cap is not None and rows_before >= cap:
            live = yield from fetch_one(sql.count_live, self._with_now({}))
            if live is None or live["n"] >= cap:
                yield from self._raise_limit(task.task_id)
        per_owner = options.owner_cap(task.owner)
        if per_owner is not None and task.owner is not None:
            if sql.bump_owner_turn is not None:
                yield from execute(sql.bump_owner_turn, {"turn": owner_turn_row(task.owner)})
            # Counted up to the cap: never more rows than that, however many the owner has.
            mine = {"owner": task.owner, "cap": per_owner}
            active = yield from fetch_one(sql.count_active_of_owner, self._with_now(mine))
            if active is None or active["n"] >= per_owner:
                yield from self._raise_limit(task.task_id, OwnerTaskLimitReached)
        record = rules.new_record(task, now)
        if (yield from execute(sql.insert, values_of(record))) != 1:
            raise DuplicateTaskId
        return record

    def _raise_limit(
        self, task_id: str, error: type[TaskLimitReached] = TaskLimitReached
    ) -> Transaction[NoReturn]:
        """At a cap: an existing id is still reported as such, as it is below the cap."""
        row = yield from fetch_one(self._sql.read, self._with_now({"task_id": task_id}))
        if record_of(row) is not None:
            raise DuplicateTaskId
        raise error

    async def get(self, task_id: str, owner: OwnerArg) -> TaskRecord:
        await self._ensure_ready()
        row = await self._fetch_one(self._sql.read, self._with_now({"task_id": task_id}))
        assert row is not None  # the read statement always yields its one row
        record = None if row["task_id"] is None else self._decode(row)
        return rules.visible(record, owner, row["now_ms"])

    async def claim(
        self,
        worker_id: str,
        *,
        lease_ms: int,
        task_id: str | None = None,
        work_types: rules.WorkTypes = None,
    ) -> Claimed | None:
        await self._ensure_ready()
        if work_types is not None and not work_types:
            return None  # no type asked for: nothing is eligible
        while True:
            claimed = await self._transact(
                Mode.TRANSACTION, self._claim(worker_id, lease_ms, task_id, work_types)
            )
            if claimed is not _LostRace.LOST:
                return claimed

    def _claim(
        self, worker_id: str, lease_ms: int, task_id: str | None, work_types: rules.WorkTypes
    ) -> Transaction[Claimed | _LostRace | None]:
        sql = self._sql
        # The database selects the candidate (and on Postgres locks it, skipping rows
        # other claimers hold) by Predicates.claimable, checked against rules.claimable,
        # and by its work type when some are asked for (S-CLAIM.4).
        if task_id is not None:
            row = yield from fetch_one(sql.claim_one, self._with_now({"task_id": task_id}))
        elif work_types is None:
            row = yield from fetch_one(sql.claim_next, self._with_now({}))
        else:
            types = {f"work_type_{i}": t for i, t in enumerate(sorted(work_types))}
            row = yield from fetch_one(sql.claim_next_of(len(types)), self._with_now(types))
        if row is None:
            return None
        record, now = from_row(row), row["now_ms"]
        # Not claimable only if the SQL drifted from the rule; not of the types asked for
        # only by id (the by-id statement does not select by type).
        if not rules.claimable(record, now) or not rules.of_work_types(record, work_types):
            return None
        claimed = rules.apply_claim(record, worker_id, lease_ms, now)
        if (yield from self._compare_and_set(claimed.record, row["row_version"])):
            return claimed
        return _LostRace.LOST

    async def renew(self, lease: Lease, *, lease_ms: int) -> Lease:
        def compute(record: TaskRecord | None, now: int) -> tuple[Lease, TaskRecord | None]:
            renewed = rules.apply_renew(record, lease, lease_ms, now)
            return renewed.lease, renewed.record

        return await self._modify(lease.task_id, compute)

    async def release(self, lease: Lease) -> None:
        def compute(record: TaskRecord | None, now: int) -> tuple[None, TaskRecord | None]:
            return None, rules.apply_release(record, lease)

        await self._modify(lease.task_id, compute)

    async def reap(self, *, limit: int = 500) -> int:
        await self._ensure_ready()
        if limit <= 0:
            return 0
        return await self._transact(Mode.TRANSACTION, self._reap(limit))

    def _reap(self, limit: int) -> Transaction[int]:
        sql = self._sql
        retention = self.options.terminal_retention_ms
        # The row counter first, as creates take it: the delete then takes the counts per
        # status (mcp_tasks_sql.counts), which a create takes after the row counter too.
        yield from self._bump_rows(0)
        # Predicates.reapable (checked against rules.is_reapable); Postgres skips rows a
        # writer or another reaper holds, so concurrent reapers delete disjoint sets.
        removed = yield from execute(
            sql.reap, self._with_now({"retention": retention, "limit": limit})
        )
        if removed:
            yield from self._bump_rows(-removed)
        return removed

    def _bump_rows(self, delta: int) -> Transaction[Row | None]:
        """Add ``delta`` to the row counter (locking its row until commit); its new
        ``n_rows`` and the store's ``now_ms``, or ``None`` when the counter row is missing."""
        sql = self._sql
        if sql.read_counter is None:  # UPDATE … RETURNING
            return (yield from fetch_one(sql.bump_rows, self._with_now({"delta": delta})))
        if (yield from execute(sql.bump_rows, {"delta": delta})) == 0:
            return None
        return (yield from fetch_one(sql.read_counter, self._with_now({})))

    async def rewrite_after(self, after: str | None, rewrite: Rewrite) -> str | None:
        """The next task by id rewritten in place (``Rewrites``): read, let ``rewrite``
        compute the payload (``rules.rewritten``), compare-and-set on the row version; on a
        lost race (a write came between), read it again."""
        await self._ensure_ready()
        while True:
            found = await self._transact(Mode.MODIFY, self._rewrite_once(after or "", rewrite))
            if found is not _LostRace.LOST:
                return found

    def _rewrite_once(self, after: str, rewrite: Rewrite) -> Transaction[str | _LostRace | None]:
        row = yield from fetch_one(self._sql.read_after, self._with_now({"after": after}))
        record = record_of(row)
        if row is None or record is None:
            return None
        written = rules.rewritten(record, rewrite(record))
        if written is None or (yield from self._compare_and_set(written, row["row_version"])):
            return record.task_id
        return _LostRace.LOST

    # --- read, compute, compare-and-set -------------------------------------------------

    async def _modify(
        self, task_id: str, compute: Callable[[TaskRecord | None, int], tuple[R, TaskRecord | None]]
    ) -> R:
        """Read the row and the store's now, let the rules compute the write, persist it with
        a compare-and-set on the row version; on a lost race, read again."""
        await self._ensure_ready()
        while True:
            result = await self._transact(Mode.MODIFY, self._modify_once(task_id, compute))
            if result is not _LostRace.LOST:
                return result

    def _modify_once(
        self, task_id: str, compute: Callable[[TaskRecord | None, int], tuple[R, TaskRecord | None]]
    ) -> Transaction[R | _LostRace]:
        row = yield from fetch_one(self._sql.read, self._with_now({"task_id": task_id}))
        assert row is not None  # the read statement always yields its one row
        result, write = compute(record_of(row), row["now_ms"])
        if write is None or (yield from self._compare_and_set(write, row["row_version"])):
            return result
        return _LostRace.LOST

    def _compare_and_set(self, record: TaskRecord, row_version: int) -> Transaction[bool]:
        values = values_of(record)
        values["task_id"], values["row_version"] = record.task_id, row_version
        return (yield from execute(self._sql.cas, values)) == 1
