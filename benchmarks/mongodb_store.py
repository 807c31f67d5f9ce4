"""Throughput of the MongoDB store's hot paths as a ratio to raw PyMongo, on the same server.

``store.get`` and ``store.put_status(Progress)`` on one task among ``--rows`` others, one
call at a time, beside raw PyMongo (``AsyncMongoClient``) doing the same single-document
read (``find_one`` by ``_id``) and update (``update_one`` by ``_id``, one ``$set``); and
``store.claim`` without an id over ``--ops`` fresh tasks beside a raw ``find_one_and_update``.
The gap is what the store adds: the server's now read with the document, the rules, the
JSON payload, and on ``put_status`` the read before the compare-and-set.

Store and raw calls alternate in chunks of 25, so a busy machine slows both alike; of
``--rounds`` rounds the best ratio is kept. Only the ratios mean anything: the server comes from
``MCP_TASKS_TEST_MONGODB_URL``, else the embedded SecantusDB test server (a MongoDB
wire-protocol server written in Python), whose absolute numbers say nothing about a real
``mongod``. Goals: get >= 0.7x raw, put_status >= 0.5x raw.

    uv run python benchmarks/mongodb_store.py [--ops 500] [--rows 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import time
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from pymongo import AsyncMongoClient, ReturnDocument

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
from mcp_tasks_contract.servers import MONGODB_URL_ENV, embedded_mongodb
from mcp_tasks_mongodb import MongoTaskStore

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

GOALS = {"get": 0.7, "put_status": 0.5}


async def rate(ops: int, call: Callable[[int], Awaitable[object]]) -> float:
    """Calls per second of ``call``, one at a time."""
    start = time.perf_counter()
    for i in range(ops):
        await call(i)
    return ops / (time.perf_counter() - start)


async def paired_rates(
    ops: int,
    ours: Callable[[int], Awaitable[object]],
    theirs: Callable[[int], Awaitable[object]],
    chunk: int = 25,
) -> tuple[float, float]:
    """Calls per second of ``ours`` and ``theirs``, measured in alternating chunks so that
    whatever else loads the machine slows both alike."""
    spent = [0.0, 0.0]
    for first in range(0, ops, chunk):
        for side, call in enumerate((ours, theirs)):
            start = time.perf_counter()
            for i in range(first, min(ops, first + chunk)):
                await call(i)
            spent[side] += time.perf_counter() - start
    return ops / spent[0], ops / spent[1]


async def bench(url: str, ops: int, rows: int, rounds: int) -> dict[str, tuple[float, float]]:
    """operation → (store calls/s, raw calls/s)."""
    prefix = "mcpt_bench_" + secrets.token_hex(4)
    store = MongoTaskStore(url, StoreOptions(max_rows=None), prefix=prefix)
    raw: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(url)
    tasks = raw[store.database][f"{prefix}_tasks"]
    best: dict[str, list[float]] = {name: [0.0, 0.0] for name in ("get", "put_status", "claim")}
    try:
        ids = [(await store.create(NewTask(new_task_id()))).task_id for _ in range(rows)]
        task_id = ids[len(ids) // 2]
        pairs: dict[str, tuple[Callable[[int], Awaitable[object]], ...]] = {
            "get": (
                lambda _: store.get(task_id, ANY_OWNER),
                lambda _: tasks.find_one({"_id": task_id}),
            ),
            "put_status": (
                lambda i: store.put_status(task_id, Progress(f"step {i}")),
                lambda i: tasks.update_one({"_id": task_id}, {"$set": {"x": f"step {i}"}}),
            ),
        }
        for _ in range(rounds):
            for name, (ours, theirs) in pairs.items():
                await paired_rates(min(50, ops), ours, theirs)  # warm up both
                measured = await paired_rates(ops, ours, theirs)
                if measured[0] / measured[1] > best[name][0] / (best[name][1] or 1):
                    best[name] = list(measured)
        # Claims take tasks for good: a fresh batch for the store, a raw queue beside it.
        for _ in range(ops):
            await store.create(NewTask(new_task_id(), work=WorkSpec("job")))
        best["claim"][0] = await rate(ops, lambda _: store.claim("w", lease_ms=60_000))
        queue = raw[store.database][f"{prefix}_queue"]
        await queue.insert_many([{"_id": i, "free": True} for i in range(ops)])
        await queue.create_index([("free", 1), ("_id", 1)])
        best["claim"][1] = await rate(
            ops,
            lambda _: queue.find_one_and_update(
                {"free": True},
                {"$set": {"free": False}},
                sort=[("_id", 1)],
                return_document=ReturnDocument.AFTER,
            ),
        )
        await queue.drop()
    finally:
        await raw.close()
        await store.close()
        await drop_namespace(namespaced_url(url, prefix))
    return {name: (ours, theirs) for name, (ours, theirs) in best.items()}


def report(name: str, results: dict[str, tuple[float, float]]) -> None:
    print(f"\n{name}")
    print(f"  {'operation':<34}{'store/raw':>10}{'goal':>8}")
    for label, key in (
        ("get / find_one", "get"),
        ("put_status / update_one", "put_status"),
        ("claim / find_one_and_update", "claim"),
    ):
        ours, theirs = results[key]
        goal = f">= {GOALS[key]:.1f}x" if key in GOALS else ""
        met = "" if key not in GOALS else ("  met" if ours / theirs >= GOALS[key] else "  MISSED")
        print(f"  {label:<34}{ours / theirs:>9.2f}x{goal:>8}{met}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=500, help="calls per measurement")
    parser.add_argument("--rows", type=int, default=200, help="other tasks in the namespace")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (best kept)")
    args = parser.parse_args()
    with ExitStack() as stack:
        url = os.environ.get(MONGODB_URL_ENV) or stack.enter_context(embedded_mongodb())
        if not url:
            raise SystemExit(f"no MongoDB server: set {MONGODB_URL_ENV} or install SecantusDB")
        where = "embedded SecantusDB" if MONGODB_URL_ENV not in os.environ else "the env's server"
        report(
            f"MongoDB ({where}; ratios only)", await bench(url, args.ops, args.rows, args.rounds)
        )


if __name__ == "__main__":
    asyncio.run(main())
