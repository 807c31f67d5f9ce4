"""The optional ``stats()`` (docs/store-contract.md, "Required and optional behaviour"): a
known population counted exactly, and a count that writes nothing.

Opt in beside the contract, and say how to read your backend's raw contents::

    class TestMyStore(StoreContract, StatsContract):
        @pytest.fixture
        def store_contents(self) -> Callable[[str], Awaitable[object]]:
            return my_raw_snapshot  # namespace -> every row, key or document, comparable
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import pytest

from mcp_tasks import (
    ANY_OWNER,
    Complete,
    Fail,
    NewTask,
    RequireInput,
    Retry,
    StoreOptions,
    TaskStatus,
    new_task_id,
)
from mcp_tasks.stores.abilities import CountsReader, StatsReader
from mcp_tasks.stores.observed import unobserved
from mcp_tasks_contract.suite.base import (
    BOOM,
    ELICIT,
    LONG_LEASE_MS,
    SHORT_MS,
    ContractBase,
    job,
    new_task,
    run_concurrently,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from mcp_tasks import Store, TaskRecord
    from mcp_tasks.stores.stats import StoreCounts, StoreStats
    from mcp_tasks_contract.handles import StoreHandles

#: The caps the population's store is opened with (reported back by ``stats``).
OPTIONS = StoreOptions(max_rows=50, max_active_per_owner=5)
#: Far from every edge: not expiring within the hour, not expired during the test.
TWO_HOURS_MS = 7_200_000
HALF_AN_HOUR_MS = 1_800_000


@dataclass(frozen=True)
class Population:
    """What :func:`populate` made: the ``created_at`` of its oldest working task."""

    oldest_working_created_at: int


async def populate(store: Store, wait_past: Callable[[int], Awaitable[None]]) -> Population:
    """Eleven tasks, one per case ``stats`` tells apart (owner, then what it is):

    ========  ======================================  ==================================
    alice     working, manual (no work)               unclaimed
    alice     working, created claimed (live lease)   claimed
    bob       working, its short lease lapsed         unclaimed, lease lapsed
    alice     input_required                          unclaimed
    ``None``  working, a retry due                    unclaimed, retry due
    ``None``  working, a retry due in 10 minutes      unclaimed, retry pending
    bob       completed
    carol     failed, TTL half an hour                expiring within the hour
    carol     cancelled, no TTL
    bob       working, manual, TTL half an hour       unclaimed, expiring within the hour
    carol     expired, not reaped                     a row, and nothing else
    ========  ======================================  ==================================

    Every other TTL is two hours. Returns when the lapsed lease, the due retry and the
    expired task are past their times on the store's clock.
    """
    oldest = await new_task(store, owner="alice", ttl_ms=TWO_HOURS_MS)
    await store.create(
        NewTask(
            new_task_id(),
            owner="alice",
            ttl_ms=TWO_HOURS_MS,
            work=job(),
            claimed_by="worker",
            lease_ms=LONG_LEASE_MS,
        )
    )
    lapsing = await new_task(store, owner="bob", ttl_ms=TWO_HOURS_MS, work=job())
    short = await store.claim("worker", lease_ms=SHORT_MS, task_id=lapsing.task_id)
    assert short is not None
    asking = await new_task(store, owner="alice", ttl_ms=TWO_HOURS_MS)
    await store.put_status(asking.task_id, RequireInput({"confirm": ELICIT}))
    due = await retrying(store, delay_ms=1)
    await retrying(store, delay_ms=LONG_LEASE_MS)
    completed = await new_task(store, owner="bob", ttl_ms=TWO_HOURS_MS)
    await store.put_status(completed.task_id, Complete({"content": []}))
    failed = await new_task(store, owner="carol", ttl_ms=HALF_AN_HOUR_MS)
    await store.put_status(failed.task_id, Fail(BOOM))
    cancelled = await new_task(store, owner="carol", ttl_ms=None)
    await store.cancel(cancelled.task_id, ANY_OWNER)
    await new_task(store, owner="bob", ttl_ms=HALF_AN_HOUR_MS)
    expired = await new_task(store, owner="carol", ttl_ms=SHORT_MS)
    assert due.retry_at is not None
    assert expired.expires_at is not None
    await wait_past(max(short.lease.expires_at, due.retry_at, expired.expires_at))
    return Population(oldest_working_created_at=oldest.created_at)


async def retrying(store: Store, *, delay_ms: int) -> TaskRecord:
    """A task (no owner) whose first attempt asked for a retry after ``delay_ms``."""
    task = await new_task(store, ttl_ms=TWO_HOURS_MS, work=job(delay_ms))
    claimed = await store.claim("worker", lease_ms=LONG_LEASE_MS, task_id=task.task_id)
    assert claimed is not None
    return (await store.put_status(task.task_id, Retry(BOOM), lease=claimed.lease)).record


def expected_figures(stats: StoreStats, population: Population) -> dict[str, tuple[object, object]]:
    """Every figure of :func:`populate`'s tasks, beside the same figures of ``stats``."""
    return {
        "rows": (stats.rows, 11),
        "expired": (stats.expired, 1),
        "by_status": (
            dict(stats.by_status),
            {
                TaskStatus.WORKING: 6,
                TaskStatus.INPUT_REQUIRED: 1,
                TaskStatus.COMPLETED: 1,
                TaskStatus.FAILED: 1,
                TaskStatus.CANCELLED: 1,
            },
        ),
        "claimed": (stats.claimed, 1),
        "unclaimed": (stats.unclaimed, 6),
        "lease_lapsed": (stats.lease_lapsed, 1),
        "retry_due": (stats.retry_due, 1),
        "retry_pending": (stats.retry_pending, 1),
        "oldest_working_created_at": (
            stats.oldest_working_created_at,
            population.oldest_working_created_at,
        ),
        "expiring_soon": (stats.expiring_soon, 2),
        "waiting_unclaimed": (stats.waiting_unclaimed, 0),  # every task is seconds old
        "owners": (stats.owners, 2),  # the two ownerless tasks are no owner's
        "busiest_owners": (stats.busiest_owners, (3, 2)),
        "caps": ((stats.max_rows, stats.max_active_per_owner), (50, 5)),
    }


class StatsContract(ContractBase):
    """The optional ``stats()``: opt in beside :class:`~mcp_tasks_contract.StoreContract`
    and override :meth:`store_contents`."""

    @pytest.fixture
    def store_contents(self) -> Callable[[str], Awaitable[object]]:
        """Override me: an async function ``namespace -> snapshot`` of everything the
        backend keeps for that namespace, raw (rows with their versions, keys with their
        values and expiries, documents), comparable with ``==``."""
        raise NotImplementedError("Override the `store_contents` fixture to run StatsContract")

    async def test_stats_counts_a_known_population_exactly(self, handles: StoreHandles) -> None:
        """Tasks in every state the stats tell apart are each counted where they belong:
        by status, claimed or not, lapsed leases, due and pending retries, the oldest
        working task, expiring within the hour, expired rows, the caps and the per-owner
        counts, largest first."""
        store = await handles.open(OPTIONS)
        population = await populate(store, handles.wait_past)
        stats = await stats_of(store)
        figures = expected_figures(stats, population)
        assert {name: got for name, (got, _) in figures.items()} == {
            name: want for name, (_, want) in figures.items()
        }
        assert stats.now >= population.oldest_working_created_at

    async def test_stats_writes_nothing(
        self, handles: StoreHandles, store_contents: Callable[[str], Awaitable[object]]
    ) -> None:
        """Counting leaves every row, key, document, revision and version as it was (and
        the snapshot does see a write: a cancel changes it)."""
        store = await handles.open(OPTIONS)
        await populate(store, handles.wait_past)
        working = await new_task(store, ttl_ms=TWO_HOURS_MS)
        before = await store_contents(handles.namespace)
        await stats_of(store)
        await stats_of(await handles.open(OPTIONS))  # a fresh handle's first use, too
        assert await store_contents(handles.namespace) == before
        await store.cancel(working.task_id, ANY_OWNER)
        assert await store_contents(handles.namespace) != before

    @pytest.mark.rule("O-COUNTS")
    async def test_counts_give_the_rows_and_statuses_of_a_known_population(
        self, handles: StoreHandles
    ) -> None:
        """The optional ``counts()`` gives every row (the expired, unreaped one too), the
        unexpired tasks per status and the row cap: the figures ``stats()`` gives."""
        store = await handles.open(OPTIONS)
        population = await populate(store, handles.wait_past)
        counts = await counts_of(store)
        want = expected_figures(await stats_of(store), population)
        assert (counts.rows, counts.expired, dict(counts.by_status), counts.max_rows) == (
            want["rows"][1],
            want["expired"][1],
            want["by_status"][1],
            OPTIONS.max_rows,
        )

    @pytest.mark.rule("O-COUNTS")
    async def test_counts_stay_exact_across_concurrent_writes_expiry_and_reaps(
        self, handles: StoreHandles
    ) -> None:
        """Creates, status changes, a cancel raced from two handles, claims, answers,
        expiry by TTL (no write) and two reapers at once, from several handles, leave
        ``counts()`` and ``stats()`` counting exactly what is stored, on every handle."""
        stores = await handles.open_many(2, StoreOptions(max_rows=None))
        first, second = stores

        async def exact(rows: int, by_status: dict[TaskStatus, int]) -> None:
            want = (rows, {status: by_status.get(status, 0) for status in TaskStatus})
            for store in stores:
                counts, stats = await counts_of(store), await stats_of(store)
                assert (counts.rows, dict(counts.by_status)) == want
                assert (stats.rows, dict(stats.by_status)) == want

        creates: list[Callable[[], Awaitable[object]]] = [
            partial(new_task, stores[i % 2], ttl_ms=TWO_HOURS_MS, work=job() if i % 2 else None)
            for i in range(24)
        ]
        created: list[TaskRecord] = await run_concurrently(creates)
        manual = [task.task_id for task in created if task.work is None]
        await exact(24, {TaskStatus.WORKING: 24})

        changes: list[Callable[[], Awaitable[object]]] = [
            *(partial(first.put_status, t, Complete({"content": []})) for t in manual[:4]),
            *(partial(second.put_status, t, Fail(BOOM)) for t in manual[4:6]),
            *(partial(s.cancel, t, ANY_OWNER) for t in manual[6:8] for s in stores),
            *(partial(first.put_status, t, RequireInput({"a": ELICIT})) for t in manual[8:]),
            *(partial(claim_and_complete, stores[i % 2]) for i in range(6)),
        ]
        outcomes = await run_concurrently(changes)
        assert [o for o in outcomes if isinstance(o, Exception)] == []
        settled = {
            TaskStatus.WORKING: 6,
            TaskStatus.INPUT_REQUIRED: 4,
            TaskStatus.COMPLETED: 10,
            TaskStatus.FAILED: 2,
            TaskStatus.CANCELLED: 2,
        }
        await exact(24, settled)

        answers: list[Callable[[], Awaitable[object]]] = [
            partial(second.update, t, ANY_OWNER, {"a": "yes"}) for t in manual[8:10]
        ]
        await run_concurrently(answers)
        settled[TaskStatus.INPUT_REQUIRED] -= 2
        settled[TaskStatus.WORKING] += 2
        await exact(24, settled)

        short = [await new_task(first, ttl_ms=SHORT_MS) for _ in range(3)]
        await handles.wait_past(max(task.expires_at or 0 for task in short))
        await exact(27, settled)  # expired: a row each, in no status

        reaped = await run_concurrently([first.reap, second.reap])
        assert sum(reaped) == 3
        await exact(24, settled)


async def counts_of(store: Store) -> StoreCounts:
    """The store's optional ``counts()``, which ``Offers(counts=True)`` declares."""
    store = unobserved(store)  # the store inside an encrypting handle
    assert isinstance(store, CountsReader), f"{type(store).__name__} offers no counts()"
    return await store.counts()


async def claim_and_complete(store: Store) -> TaskRecord:
    """Claim the oldest eligible task and complete it under the lease."""
    claimed = await store.claim("worker", lease_ms=LONG_LEASE_MS)
    assert claimed is not None, "a task with work was left to claim"
    done = await store.put_status(
        claimed.record.task_id, Complete({"content": []}), lease=claimed.lease
    )
    return done.record


async def stats_of(store: Store) -> StoreStats:
    """The store's optional ``stats()``, which this part needs."""
    store = unobserved(store)  # the store inside an encrypting handle
    assert isinstance(store, StatsReader), f"{type(store).__name__} offers no stats()"
    return await store.stats()
