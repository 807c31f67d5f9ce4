"""Throughput of the Redis store's hot paths next to raw redis-py, on the same server.

``store.get`` and ``store.put_status(Progress)`` on one task among ``--rows`` others, one
call at a time, beside raw redis-py reading the same hash (``HMGET``) and writing a field
(``HSET``); and ``store.claim`` without an id (one Lua script) over ``--ops`` fresh tasks
beside a raw ``ZPOPMIN``. The gap is what the store adds: the server clock inside a
script, the rules, the JSON document and the version check (and on ``put_status`` the
read before the write).

The server comes from ``MCP_TASKS_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``).

    uv run python benchmarks/redis_store.py [--ops 3000] [--rows 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import time
from typing import TYPE_CHECKING

from redis.asyncio import Redis

from mcp_tasks import (
    ANY_OWNER,
    NewTask,
    Progress,
    StoreOptions,
    WorkSpec,
    drop_namespace,
    namespaced_url,
    new_task_id,
)
from mcp_tasks_contract.servers import REDIS_URL_ENV
from mcp_tasks_redis import RedisTaskStore

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable


async def rate(ops: int, call: Callable[[int], Awaitable[object]], warm_up: bool = True) -> float:
    """Calls per second of ``call``, one at a time, after a short warm-up."""
    for i in range(min(200, ops // 10) if warm_up else 0):
        await call(i)
    start = time.perf_counter()
    for i in range(ops):
        await call(i)
    return ops / (time.perf_counter() - start)


async def bench(url: str, ops: int, rows: int) -> dict[str, float]:
    prefix = "mcpt_bench_" + secrets.token_hex(4)
    store = RedisTaskStore(url, StoreOptions(max_rows=None), prefix=prefix)
    raw = Redis.from_url(url)
    try:
        ids = [(await store.create(NewTask(new_task_id()))).task_id for _ in range(rows)]
        task_id = ids[len(ids) // 2]
        results = {
            "store.get": await rate(ops, lambda _: store.get(task_id, ANY_OWNER)),
            "store.put_status": await rate(
                ops, lambda i: store.put_status(task_id, Progress(f"step {i}"))
            ),
        }
        for _ in range(ops):
            await store.create(NewTask(new_task_id(), work=WorkSpec("job")))
        results["store.claim"] = await rate(
            ops, lambda _: store.claim("w", lease_ms=60_000), warm_up=False
        )
        key = "{" + prefix + "}:t:" + task_id
        results["raw read"] = await rate(ops, lambda _: raw.hmget(key, "v", "d"))
        results["raw update"] = await rate(ops, lambda i: raw.hset(key, "x", f"step {i}"))
        queue = "{" + prefix + "}:bench_queue"
        await raw.zadd(queue, {str(i): i for i in range(ops)})
        results["raw claim"] = await rate(ops, lambda _: raw.zpopmin(queue), warm_up=False)
    finally:
        await raw.aclose()
        await store.close()
        await drop_namespace(namespaced_url(url, prefix))
    return results


def report(name: str, results: dict[str, float]) -> None:
    print(f"\n{name}")
    print(f"  {'operation':<24}{'store ops/s':>12}{'raw ops/s':>12}{'store/raw':>11}")
    for label, ours, raw in (
        ("get / HMGET", results["store.get"], results["raw read"]),
        ("put_status / HSET", results["store.put_status"], results["raw update"]),
        ("claim / ZPOPMIN", results["store.claim"], results["raw claim"]),
    ):
        print(f"  {label:<24}{ours:>12,.0f}{raw:>12,.0f}{ours / raw:>10.0%}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=3000, help="calls per measurement")
    parser.add_argument("--rows", type=int, default=1000, help="other tasks in the namespace")
    args = parser.parse_args()
    url = os.environ.get(REDIS_URL_ENV, "redis://127.0.0.1:6379/0")
    report(f"Redis ({url})", await bench(url, args.ops, args.rows))


if __name__ == "__main__":
    asyncio.run(main())
