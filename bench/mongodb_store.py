"""Throughput of the MongoDB store's hot paths as a ratio to raw PyMongo, on the same server.

``store.get`` and ``store.put_status(Progress)`` on one task among ``--rows`` others, one
call at a time, beside raw PyMongo (``AsyncMongoClient``) doing the same single-document
read (``find_one`` by ``_id``) and update (``update_one`` by ``_id``, one ``$set``); and
``store.claim`` without an id over ``--ops`` fresh tasks beside a raw ``find_one_and_update``.
The gap is what the store adds: the server's now read with the document, the rules, the
JSON payload, and on ``put_status`` the read before the compare-and-set.

Store and raw alternate in ``--rounds`` rounds (store, raw, store, raw, ...); each ratio is
the median of the rounds' ratios, so a busy machine slows both sides of a ratio alike. Only
the ratios mean anything: the server comes from
``MCP_TASKS_TEST_MONGODB_URL``, else the embedded SecantusDB test server (a MongoDB
wire-protocol server written in Python), whose absolute numbers say nothing about a real
``mongod``. Goals: get >= 0.7x raw, put_status >= 0.5x raw.

    uv run python -m bench.mongodb_store [--ops 300] [--rows 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from pymongo import AsyncMongoClient, ReturnDocument

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
from mcp_tasks_mongodb import MongoTaskStore
from mcp_tasks_mongodb.provision import MONGODB_URL_ENV, embedded_mongodb

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

GOALS = {"get": 0.7, "put_status": 0.5}


async def bench(url: str, ops: int, rows: int, rounds: int) -> dict[str, list[float]]:
    """Per operation, the (store, raw) rates of each round, flat: store, raw, store, ..."""
    prefix = "mcpt_bench_" + secrets.token_hex(4)
    store = MongoTaskStore(url, StoreOptions(max_rows=None), prefix=prefix)
    raw: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(url)
    tasks = raw[store.database][f"{prefix}_tasks"]
    queue = raw[store.database][f"{prefix}_queue"]
    results: dict[str, list[float]] = {name: [] for name in alternating.FLAT_NAMES}
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
        for ours, theirs in pairs.values():  # warm up both: connections, first plans
            await rate(min(50, ops), ours)
            await rate(min(50, ops), theirs)
        await queue.create_index([("free", 1), ("_id", 1)])
        for round_ in range(rounds):
            for name, (ours, theirs) in pairs.items():
                results[name] += [await rate(ops, ours), await rate(ops, theirs)]
            # Claims take tasks for good (an hour's lease: a shorter one could run out during
            # the run and put the tasks back in the ready lane): a fresh batch for the store,
            # a raw queue beside it.
            for _ in range(ops):
                await store.create(NewTask(new_task_id(), work=WorkSpec("job")))
            await queue.insert_many([{"_id": round_ * ops + i, "free": True} for i in range(ops)])
            results["claim"] += [
                await rate(ops, lambda _: store.claim("w", lease_ms=3_600_000)),
                await rate(
                    ops,
                    lambda _: queue.find_one_and_update(
                        {"free": True},
                        {"$set": {"free": False}},
                        sort=[("_id", 1)],
                        return_document=ReturnDocument.AFTER,
                    ),
                ),
            ]
        await queue.drop()
    finally:
        await raw.close()
        await store.close()
        await drop_namespace(namespaced_url(url, prefix))
    return results


def report(name: str, results: dict[str, list[float]]) -> None:
    print(f"\n{name}: medians of {len(results['get']) // 2} alternating rounds")
    print(f"  {'operation':<34}{'store/raw':>10}{'goal':>8}")
    for label, key in (
        ("get / find_one", "get"),
        ("put_status / update_one", "put_status"),
        ("claim / find_one_and_update", "claim"),
    ):
        ours, theirs = alternating.median_round(results[key])
        measured = ours / theirs
        goal = f">= {GOALS[key]:.1f}x" if key in GOALS else ""
        met = "" if key not in GOALS else ("  met" if measured >= GOALS[key] else "  MISSED")
        print(f"  {label:<34}{measured:>9.2f}x{goal:>8}{met}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=300, help="calls per measurement")
    parser.add_argument("--rows", type=int, default=200, help="other tasks in the namespace")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds")
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
