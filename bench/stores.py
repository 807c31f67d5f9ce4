"""Sections 3 and 4: the stores called directly, in this process, one call at a time.

3. Store operations next to the raw driver on the same server: ``get`` and ``put_status``
   from ``bench/sql_stores.py``, ``bench/redis_store.py`` and
   ``bench/mongodb_store.py`` (imported, not copied), and ``create`` and ``claim`` +
   ``complete`` on every backend.
4. Scale: the latency of ``get``, ``put_status`` and ``create`` with 1 k tasks stored and
   with ``--scale-rows`` (100 k) stored; and the create throughput far from the row cap and
   near it, with a reaper deleting expired tasks all along.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bench import alternating, mongodb_store, redis_store, sql_stores
from mcp_tasks import (
    ANY_OWNER,
    Complete,
    NewTask,
    Progress,
    StoreOptions,
    TaskLimitReached,
    WorkSpec,
    new_task_id,
    store_from_url,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from bench.common import Backend
    from mcp_tasks import Store
    from mcp_tasks.domain.jsonsafe import JSONObject

CAPABILITIES: JSONObject = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def new_task(ttl_ms: int | None = 3_600_000, work: bool = False) -> NewTask:
    """A task as the engine creates one for a tool call."""
    return NewTask(
        new_task_id(),
        ttl_ms=ttl_ms,
        poll_interval_ms=500,
        status_message="working",
        client_capabilities=CAPABILITIES,
        work=WorkSpec("nap", {"ms": 200}) if work else None,
    )


async def seed(
    store: Store, count: int, *, ttl_ms: int | None = 3_600_000, deadline: float | None = None
) -> list[str]:
    """``count`` new tasks, created 50 at a time (fewer if ``deadline``, a ``time.monotonic``
    instant, passes first); their ids."""
    ids: list[str] = []
    while len(ids) < count and (deadline is None or time.monotonic() < deadline):
        batch = [new_task(ttl_ms) for _ in range(min(50, count - len(ids)))]
        await asyncio.gather(*(store.create(t) for t in batch))
        ids += [t.task_id for t in batch]
    return ids


async def rate(ops: int, call: Callable[[int], Awaitable[object]]) -> float:
    """Calls per second of ``call``, one at a time (the micro-benchmarks' own measure)."""
    return float(await sql_stores.rate(ops, call))


async def generic_ops(url: str, ops: int) -> dict[str, float]:
    """create, and claim + complete (a claim of the oldest eligible task, then its result
    under the lease), per second on the store at ``url``."""
    store = store_from_url(url, StoreOptions(max_rows=None))
    try:
        results = {"store.create": await rate(ops, lambda _: store.create(new_task()))}
        for _ in range(ops + min(200, ops // 10)):
            await store.create(new_task(work=True))

        async def claim_complete(_: int) -> object:
            claimed = await store.claim("bench", lease_ms=60_000)
            if claimed is None:
                raise RuntimeError("nothing to claim")
            return await store.put_status(
                claimed.record.task_id, Complete({"content": []}), lease=claimed.lease
            )

        results["store.claim+complete"] = await rate(ops, claim_complete)
    finally:
        await store.close()
    return results


async def store_ops(backend: Backend, fresh: Callable[[], str], ops: int) -> dict[str, float]:
    """Section 3 for one backend: ops/s of the store and, where there is one, of the raw
    driver (``raw read``, ``raw update``, ``raw claim``) on the same server."""
    rows = 1000
    if backend.name == "sqlite":
        with tempfile.TemporaryDirectory() as directory:
            results = await sql_stores.bench_sqlite(Path(directory), ops, rows)
    elif backend.name == "postgres" and backend.base is not None:
        results = await sql_stores.bench_postgres(backend.base, ops, rows)
    elif backend.name == "redis" and backend.base is not None:
        # Five alternating rounds: the median round's store and raw rates (as_rates).
        results = alternating.as_rates(await redis_store.bench(backend.base, ops, rows, 5))
    elif backend.name == "mongodb" and backend.base is not None:
        results = alternating.as_rates(await mongodb_store.bench(backend.base, ops, rows, 5))
    else:  # no raw driver (memory): the store alone
        results = await get_put(fresh(), ops, rows)
    return {**results, **await generic_ops(fresh(), ops)}


async def get_put(url: str, ops: int, rows: int) -> dict[str, float]:
    """get and put_status per second on one task among ``rows``, as the micro-benchmarks
    measure them, on a store with no raw driver beside it."""
    store = store_from_url(url, StoreOptions(max_rows=None))
    try:
        ids = await seed(store, rows)
        task_id = ids[len(ids) // 2]
        return {
            "store.get": await rate(ops, lambda _: store.get(task_id, ANY_OWNER)),
            "store.put_status": await rate(
                ops, lambda i: store.put_status(task_id, Progress(f"step {i}"))
            ),
        }
    finally:
        await store.close()


async def latencies(store: Store, ids: list[str], ops: int, repeats: int = 3) -> dict[str, float]:
    """Mean microseconds of get and put_status on random stored tasks, and of create: the
    best of ``repeats`` runs of ``ops`` calls (a pause elsewhere on the machine hits one)."""
    picks = [random.choice(ids) for _ in range(ops)]  # spread over the table, not secrecy

    async def mean_us(call: Callable[[int], Awaitable[object]]) -> float:
        return min([1e6 / await rate(ops, call) for _ in range(repeats)])

    return {
        "get_us": await mean_us(lambda i: store.get(picks[i], ANY_OWNER)),
        "put_status_us": await mean_us(lambda i: store.put_status(picks[i], Progress(f"step {i}"))),
        "create_us": await mean_us(lambda _: store.create(new_task())),
    }


async def scale(
    url: str, small: int, large: int, ops: int, seed_budget_s: float
) -> dict[str, dict[str, float]]:
    """Section 4a: latencies with ``small`` and with ``large`` tasks stored. The tasks are
    created through the store; where that would take more than ``seed_budget_s`` (a SQLite
    file on a busy disk: every create is a synced transaction) it stops there, and
    ``rows.large`` says how many were stored."""
    store = store_from_url(url, StoreOptions(max_rows=None))
    try:
        ids = await seed(store, small)
        at_small = await latencies(store, ids, ops)
        start = time.perf_counter()
        added = await seed(store, large - len(ids), deadline=time.monotonic() + seed_budget_s)
        seeded = time.perf_counter() - start
        ids += added
        at_large = await latencies(store, ids, ops)
    finally:
        await store.close()
    return {
        "small": at_small,
        "large": at_large,
        "rows": {"small": small, "large": len(ids), "asked": large},
        "seed": {"creates_per_s": len(added) / seeded},
    }


async def near_cap(url: str, cap: int) -> dict[str, float]:
    """Section 4b: creates per second far from the row cap (the first 5 %) and near it
    (from 90 % to 95 % of ``cap`` live tasks, beside 30 % of ``cap`` expired ones), with a
    reaper deleting expired tasks every 100 ms all along."""
    store = store_from_url(url, StoreOptions(max_rows=cap))
    window = max(100, cap // 20)
    stop = asyncio.Event()
    reaped = 0

    async def reaper() -> None:
        nonlocal reaped
        while not stop.is_set():
            reaped += await store.reap(limit=500)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.1)

    refused = 0

    async def create(_: int) -> object:
        nonlocal refused
        try:
            return await store.create(new_task())
        except TaskLimitReached:
            refused += 1
            return None

    reaping = asyncio.create_task(reaper())
    try:
        far = await timed(window, create)
        await seed(store, cap * 3 // 10, ttl_ms=1)  # expire at once: rows for the reaper
        await seed(store, cap * 9 // 10 - window)
        near = await timed(window, create)
    finally:
        stop.set()
        await reaping
        await store.close()
    return {
        "cap": cap,
        "far_creates_per_s": far,
        "near_creates_per_s": near,
        "refused": refused,
        "reaped": reaped,
    }


async def timed(count: int, call: Callable[[int], Awaitable[object]]) -> float:
    start = time.perf_counter()
    for i in range(count):
        await call(i)
    return count / (time.perf_counter() - start)
