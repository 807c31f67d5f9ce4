"""Throughput of the Redis store's hot paths next to raw redis-py, on the same server.

On one task among ``--rows`` others, one call at a time:

* ``store.get`` beside raw ``HGETALL`` of the same hash;
* ``store.put_status(Progress)`` beside a raw ``EVALSHA`` of a script of the same shape as
  the store's write: the server's ``TIME``, the same fields read, the same fields and
  indexes written, the janitor's ``PEXPIREAT``, the hash returned the same way; only the
  rules are missing;
* ``store.claim`` without an id (one script over ``--ops`` fresh tasks) beside a raw
  ``ZPOPMIN``.

Store and raw alternate in ``--rounds`` rounds; each ratio is the median of the rounds'
ratios, so a busy machine slows both sides of a ratio alike, and the rates printed (and
handed to the bench suite, ``as_rates``) are that median round's. Goals: get at least
0.7x raw, put_status at least 0.5x raw.

The server comes from ``MCP_TASKS_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``).

    uv run python -m bench.redis_store [--ops 2000] [--rows 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
from typing import TYPE_CHECKING

from redis.asyncio import Redis

from bench import alternating
from bench.alternating import rate
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
from mcp_tasks_redis import RedisTaskStore
from mcp_tasks_redis.provision import REDIS_URL_ENV

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

#: The store's put_status(Progress) script without its rules: what one round trip that
#: reads and writes these keys costs on this server. KEYS: task, rows, active, ready,
#: delayed, retain; ARGV: status message.
RAW_WRITE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local f = redis.call('HMGET', KEYS[1], 's', 'e', 'n', 'ev', 'ct', 'ce', 'g', 'at', 'rd')
local g = redis.call('HMGET', KEYS[1], 'n', 'u')
redis.call('HSET', KEYS[1], 's', f[1], 'n', tonumber(g[1]) + 1, 'u', now, 'm', ARGV[1])
local h = redis.call('HMGET', KEYS[1], 's', 'w', 'c', 'u', 'e', 'l', 'r', 'ce', 'a')
redis.call('ZADD', KEYS[2], '+inf', KEYS[1])
redis.call('ZADD', KEYS[3], '+inf', KEYS[1])
redis.call('ZREM', KEYS[4], KEYS[1])
redis.call('ZREM', KEYS[5], KEYS[1])
redis.call('ZREM', KEYS[6], KEYS[1])
redis.call('PERSIST', KEYS[1])
local flat = redis.call('HGETALL', KEYS[1])
local fields = {}
for i = 1, #flat, 2 do fields[flat[i]] = flat[i + 1] end
return {'applied', g[1], cjson.encode(fields)}
"""

GOALS = {"get": 0.7, "put_status": 0.5}


async def bench(url: str, ops: int, rows: int, rounds: int) -> dict[str, list[float]]:
    """Per operation, the (store, raw) rates of each round."""
    prefix = "mcpt_bench_" + secrets.token_hex(4)
    store = RedisTaskStore(url, StoreOptions(max_rows=None), prefix=prefix)
    raw = Redis.from_url(url)
    results: dict[str, list[float]] = {}
    try:
        ids = [
            (await store.create(NewTask(new_task_id(), ttl_ms=None))).task_id for _ in range(rows)
        ]
        task_id = ids[len(ids) // 2]
        tag = "{" + prefix + "}"
        key = f"{tag}:t:{task_id}"
        keys = [key, f"{tag}:rows", f"{tag}:active:n", f"{tag}:ready", f"{tag}:delayed"]
        raw_write = raw.register_script(RAW_WRITE)
        pairs: dict[str, tuple[Callable[[int], Awaitable[object]], ...]] = {
            "get": (lambda _: store.get(task_id, ANY_OWNER), lambda _: raw.hgetall(key)),
            "put_status": (
                lambda i: store.put_status(task_id, Progress(f"step {i}")),
                lambda i: raw_write(keys=[*keys, f"{tag}:retain"], args=[f"step {i}"]),
            ),
        }
        for name, (ours, theirs) in pairs.items():  # warm up: connections, script SHAs
            await rate(200, ours)
            await rate(200, theirs)
            results[name] = []
        results["claim"] = []
        for _ in range(rounds):
            for name, (ours, theirs) in pairs.items():
                results[name] += [await rate(ops, ours), await rate(ops, theirs)]
            for _ in range(ops):
                await store.create(NewTask(new_task_id(), work=WorkSpec("job")))
            queue = f"{tag}:bench_queue"
            await raw.zadd(queue, {str(i): i for i in range(ops)})

            async def pop(_: int, queue: str = queue) -> object:
                return await raw.zpopmin(queue)

            results["claim"] += [
                await rate(ops, lambda _: store.claim("w", lease_ms=60_000)),
                await rate(ops, pop),
            ]
    finally:
        await raw.aclose()
        await store.close()
        await drop_namespace(namespaced_url(url, prefix))
    return results


def report(name: str, results: dict[str, list[float]]) -> None:
    print(f"\n{name}")
    print(f"  {'operation':<30}{'store ops/s':>12}{'raw ops/s':>12}{'store/raw':>11}  goal")
    labels = {
        "get": "get / HGETALL",
        "put_status": "put_status / EVALSHA",
        "claim": "claim / ZPOPMIN",
    }
    for op, label in labels.items():
        ours, theirs = alternating.median_round(results[op])
        ratio = ours / theirs
        goal = GOALS.get(op)
        verdict = "" if goal is None else f"≥ {goal:.0%}: {'met' if ratio >= goal else 'MISSED'}"
        print(f"  {label:<30}{ours:>12,.0f}{theirs:>12,.0f}{ratio:>10.0%}  {verdict}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=2000, help="calls per measurement")
    parser.add_argument("--rows", type=int, default=1000, help="other tasks in the namespace")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    args = parser.parse_args()
    url = os.environ.get(REDIS_URL_ENV, "redis://127.0.0.1:6379/0")
    report(f"Redis ({url})", await bench(url, args.ops, args.rows, args.rounds))


if __name__ == "__main__":
    asyncio.run(main())
