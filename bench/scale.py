"""Section 4c: every store operation with a small table and with a large one, in one run.

The table is shaped as a served store's: 80 % finished tasks, 20 % queued with work, spread
over 2,000 owners, created through the store or copied from rows it wrote. Each size is a
table of its own, all seeded before any is measured; then, in :data:`ROUNDS` rounds, each
size in turn (the order rotating from round to round) gets the mean latency of ``create``,
``get``, a claim of the oldest eligible task, ``complete`` under its lease, ``renew``,
``reap`` (per expired row deleted, beside the table), ``stats()`` and ``counts()``. A
size's figure is the median of its rounds; each goal is the large size's figure over the
small size's (≤ 1.3). A busy spell on the machine falls on every size alike, not on the
one measured while it lasted. A third size (``huge``: 1 M rows in ``bench.scale_section``)
is measured the same way; the larger sizes are grown by :func:`grow` (bulk copies inside
the database where the store has them: ``bench/bulk_seed.py``).

Beside the timing, what the store counts is checked: at each size and round ``counts()``
and ``stats()`` must give exactly the rows and statuses the section wrote (``exact``), the
behaviour the small run in ``bench/tests`` asserts.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from bench.bulk_seed import copier
from bench.stores import new_task
from mcp_tasks import ANY_OWNER, Complete, StoreOptions, TaskStatus, new_task_id, store_from_url
from mcp_tasks.domain import rules
from mcp_tasks.stores.abilities import CountsReader, StatsReader

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from mcp_tasks import Claimed, Store

#: The operations measured at each size, in the order they run.
OPERATIONS = ("create", "get", "claim", "complete", "renew", "reap", "stats", "counts")
#: Owners of the seeded tasks.
OWNERS = 2_000
#: The store's bound on each operation in this section.
STATS_BOUND_MS = 60_000
#: Expired rows the reap deletes at each size, over all its rounds.
EXPIRED = 2_000
#: Rounds of measurement; each size is measured once a round.
ROUNDS = 5
#: Seconds between two reaps of every size while the tables settle, as a served store's
#: reaper runs (on MongoDB a reap also folds the writes into its counters).
SETTLE_REAP_S = 10


class Population:
    """The tasks the section wrote: their ids, the queued ones, and the counts they make."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        #: the tasks seeded as queued with work and not yet claimed
        self.queued: dict[str, None] = {}
        self.rows = 0
        self.by_status: Counter[TaskStatus] = Counter()

    def wrote(self, status: TaskStatus, rows: int = 1) -> None:
        self.rows += rows
        self.by_status[status] += rows

    def moved(self, before: TaskStatus, after: TaskStatus) -> None:
        self.by_status[before] -= 1
        self.by_status[after] += 1


async def seed(
    store: Store, population: Population, count: int, deadline: float, batch_size: int = 100
) -> None:
    """``count`` more tasks (fewer if ``deadline``, a ``time.monotonic`` instant, passes):
    one in five queued with work, the others completed, each of one of :data:`OWNERS`,
    created through the store ``batch_size`` at a time."""
    made = 0
    while made < count and time.monotonic() < deadline:
        batch = [
            replace(new_task(work=(made + i) % 5 == 0), owner=f"owner-{(made + i) % OWNERS}")
            for i in range(min(batch_size, count - made))
        ]
        await asyncio.gather(*(store.create(task) for task in batch))
        finished = [task.task_id for task in batch if task.work is None]
        await asyncio.gather(
            *(store.put_status(task_id, Complete({"content": []})) for task_id in finished)
        )
        for task in batch:
            population.ids.append(task.task_id)
            if task.work is None:
                population.wrote(TaskStatus.COMPLETED)
            else:
                population.queued[task.task_id] = None
                population.wrote(TaskStatus.WORKING)
        made += len(batch)


#: Rows a bulk copy inserts per statement; the tasks created through the store first as
#: its templates; creates in flight where there is no bulk copy.
COPY_CHUNK = 20_000
TEMPLATES = 1_000
CREATES_IN_FLIGHT = 200
#: Seconds from a size's last seeded task to its measurement (``settle_s`` of
#: :func:`section`): ``stats()`` reads the claimable tasks created within the unclaimed
#: threshold (30 s) and the rows expiring in the last minute of its horizon, so a table
#: seeded at full speed a moment ago is read almost whole, where a table that grew at any
#: steady rate has a minute's creates there. Past both, with 5 s to spare, every size is
#: measured with the same few recent rows: the section's own creates.
SETTLE_S = (rules.UNCLAIMED_AFTER_MS + 60_000) / 1000 + 5


async def grow(store: Store, population: Population, count: int, deadline: float) -> None:
    """``count`` more tasks shaped as :func:`seed`'s (fewer if ``deadline`` passes): where
    the store has a bulk copy (``bench/bulk_seed.py``), :data:`TEMPLATES` created through
    it and copies of their rows made inside the database; else creates through the store,
    many in flight."""
    copy = copier(store)
    if copy is None or count <= TEMPLATES:
        await seed(store, population, count, deadline, CREATES_IN_FLIGHT)
        return
    known = len(population.ids)
    await seed(store, population, TEMPLATES, deadline)
    templates = population.ids[known:]
    queued = [task_id for task_id in templates if task_id in population.queued]
    finished = [task_id for task_id in templates if task_id not in population.queued]
    made = TEMPLATES
    while made < count and time.monotonic() < deadline:
        pairs, work = [], []
        for i in range(made, made + min(COPY_CHUNK, count - made)):
            is_queued = i % 5 == 0
            template = queued[i % len(queued)] if is_queued else finished[i % len(finished)]
            pairs.append((new_task_id(), template))
            work.append(is_queued)
        await copy(pairs)
        for (task_id, _), is_queued in zip(pairs, work, strict=True):
            population.ids.append(task_id)
            if is_queued:
                population.queued[task_id] = None
                population.wrote(TaskStatus.WORKING)
            else:
                population.wrote(TaskStatus.COMPLETED)
        made += len(pairs)


async def mean_us(count: int, call: Callable[[int], Awaitable[object]]) -> float:
    """Mean microseconds of ``count`` calls, one at a time."""
    start = time.perf_counter()
    for i in range(count):
        await call(i)
    return (time.perf_counter() - start) / max(count, 1) * 1e6


#: Calls of ``stats()`` and ``counts()`` per size and round, the fastest reported: each
#: takes about a millisecond on the SQL stores and Redis, so one pause elsewhere would
#: decide a single call's figure.
READ_REPEATS = 5


async def best_us(repeats: int, call: Callable[[], Awaitable[object]]) -> float:
    """The fastest of ``repeats`` calls, in microseconds (a pause elsewhere hits one)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        await call()
        times.append((time.perf_counter() - start) * 1e6)
    return min(times)


def claimer(store: Store, claimed: list[Claimed]) -> Callable[[int], Awaitable[object]]:
    """A call that claims the oldest eligible task (for ten minutes) and keeps its claim in
    ``claimed``; it fails when nothing is left to claim."""

    async def claim(_: int) -> object:
        got = await store.claim("bench", lease_ms=600_000)
        if got is None:
            raise RuntimeError("nothing left to claim")
        claimed.append(got)
        return got

    return claim


async def measure(
    store: Store, population: Population, ops: int, expired: int, claims: int
) -> tuple[dict[str, float], dict[str, Any]]:
    """Every operation's mean latency at the table's current size (``claims`` claims,
    renews and completes, ``ops`` of the others), and what ``counts()`` and ``stats()``
    gave beside what the section wrote."""
    figures: dict[str, float] = {}

    async def create(_: int) -> object:
        record = await store.create(replace(new_task(), owner="owner-0"))
        population.ids.append(record.task_id)
        population.wrote(TaskStatus.WORKING)
        return record

    figures["create_us"] = await mean_us(ops, create)
    picks = [random.choice(population.ids) for _ in range(ops)]  # spread, not secrecy
    figures["get_us"] = await mean_us(ops, lambda i: store.get(picks[i], ANY_OWNER))
    claimed: list[Claimed] = []
    figures["claim_us"] = await mean_us(claims, claimer(store, claimed))
    figures["renew_us"] = await mean_us(
        claims, lambda i: store.renew(claimed[i].lease, lease_ms=600_000)
    )

    async def complete(i: int) -> object:
        lease = claimed[i].lease
        done = await store.put_status(lease.task_id, Complete({"content": []}), lease=lease)
        del population.queued[lease.task_id]
        population.moved(TaskStatus.WORKING, TaskStatus.COMPLETED)
        return done

    # complete re-reads each lease's latest end from renew: renew kept token and generation
    figures["complete_us"] = await mean_us(claims, complete)
    for start in range(0, expired, 100):
        await asyncio.gather(
            *(store.create(new_task(ttl_ms=1)) for _ in range(min(100, expired - start)))
        )
    await asyncio.sleep(0.01)  # every one of them past its TTL
    started, reaped = time.perf_counter(), 0
    while removed := await store.reap(limit=500):
        reaped += removed
    figures["reap_us"] = (time.perf_counter() - started) / max(reaped, 1) * 1e6
    if isinstance(store, StatsReader):
        figures["stats_us"] = await best_us(READ_REPEATS, store.stats)
    if isinstance(store, CountsReader):
        figures["counts_us"] = await best_us(READ_REPEATS, store.counts)
    return figures, await exactness(store, population, reaped == expired)


async def exactness(store: Store, population: Population, reaped_all: bool) -> dict[str, Any]:
    """What the store counts beside what the section wrote (``exact``: they agree)."""
    want = {"rows": population.rows, "by_status": _named(population.by_status)}
    found: dict[str, Any] = {"wrote": want, "reaped_all": reaped_all}
    if isinstance(store, StatsReader):
        stats = await store.stats()
        found["stats"] = {"rows": stats.rows, "by_status": _named(stats.by_status)}
    if isinstance(store, CountsReader):
        counts = await store.counts()
        found["counts"] = {"rows": counts.rows, "by_status": _named(counts.by_status)}
    found["exact"] = reaped_all and all(
        found[name] == want for name in ("stats", "counts") if name in found
    )
    return found


def _named(by_status: Any) -> dict[str, int]:
    return {status.value: int(by_status.get(status, 0)) for status in TaskStatus}


async def settle(stores: list[Store], seconds: float) -> None:
    """``seconds`` of waiting, every store reaped each :data:`SETTLE_REAP_S` as a served
    store's reaper does (nothing is due: the seeded tasks live an hour)."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        for store in stores:
            await store.reap(limit=500)
        await asyncio.sleep(min(SETTLE_REAP_S, left))


async def section(  # noqa: PLR0917 - the run's settings, as stores.scale takes them
    fresh: Callable[[], str],
    small: int,
    large: int,
    ops: int,
    seed_budget_s: float,
    expired: int = EXPIRED,
    huge: int | None = None,
    settle_s: float = SETTLE_S,
    rounds: int = ROUNDS,
) -> dict[str, Any]:
    """Section 4c on tables of ``small`` rows, ``large`` and, if given, ``huge`` (each a
    fresh namespace of ``fresh()``, seeded to as many as ``seed_budget_s`` of seeding
    allows; ``rows`` says), measured ``settle_s`` after the last seeding
    (:data:`SETTLE_S`) in ``rounds`` rounds: ``ops`` calls of each operation and
    ``expired`` reaped rows a size over all of them; each figure is the median of its
    rounds."""
    # A bound of a minute, not the product's 5 s: a read that takes seconds at 1 M rows
    # (stats() reading every task) is a figure to report, not a failure of the run.
    options = StoreOptions(max_rows=None, max_active_per_owner=None, timeout_ms=STATS_BOUND_MS)
    targets = {"small": small, "large": large, **({"huge": huge} if huge is not None else {})}
    stores = {size: store_from_url(fresh(), options) for size in targets}
    populations = {size: Population() for size in targets}
    result: dict[str, Any] = {"rows": {"asked": large}, "seed": {}, "exact": {}, "rounds": {}}
    if huge is not None:
        result["rows"]["asked_huge"] = huge
    try:
        for size, target in targets.items():
            store, population, started = stores[size], populations[size], time.perf_counter()
            await grow(store, population, target, time.monotonic() + seed_budget_s)
            result["seed"][size] = {
                "tasks_per_s": population.rows / max(time.perf_counter() - started, 1e-9),
                "how": "copied in the database"
                if copier(store) and target > TEMPLATES
                else "created through the store",
            }
        await settle(list(stores.values()), settle_s)
        sizes = list(targets)
        per_round: dict[str, list[dict[str, float]]] = {size: [] for size in sizes}
        calls = max(ops // rounds, 1)
        for turn in range(rounds):
            for size in sizes[turn % len(sizes) :] + sizes[: turn % len(sizes)]:
                population = populations[size]
                claims = min(calls, len(population.queued) // (rounds - turn))
                share = expired // rounds + (turn < expired % rounds)
                figures, check = await measure(stores[size], population, calls, share, claims)
                per_round[size].append(figures)
                was = result["exact"].get(size, {"exact": True})
                result["exact"][size] = {**check, "exact": was["exact"] and check["exact"]}
        for size, measured in per_round.items():
            result["rounds"][size] = {
                name: [round(figures[name], 1) for figures in measured] for name in measured[0]
            }
            result[size] = {
                name: statistics.median(figures[name] for figures in measured)
                for name in measured[0]
            }
            result["rows"][size] = populations[size].rows
    finally:
        for store in stores.values():
            await store.close()
    result["seed"]["tasks_per_s"] = result["seed"]["large"]["tasks_per_s"]
    return result
