"""What the default per-owner cap costs a create: the same creates with it (``StoreOptions()``)
and without it (``max_active_per_owner=None``), in alternating rounds on each store.

Two populations, each on its own namespace for either side:

* ``spread``: creates of 50 principals in turn, each holding few active tasks (the usual
  server);
* ``busy``: creates of one principal already holding ``--held`` active tasks (900: near the
  default cap of 1 000, where a count up to the cap reads the most), at most as many as
  the cap leaves room for. Each round's tasks are cancelled after the round, outside the
  timing, so the principal stays at ``--held``.

Each round times ``--ops`` creates one at a time, with the cap then without (the order
alternating), and reports the median of the rounds' ratios (on / off) of the creates per
second and of this process's CPU time per create (``/proc``-based ``time.process_time``;
for memory and SQLite that is all the work, for the servers only the client's share).

    uv run python -m bench.owner_cap [--ops 200] [--rounds 5] [--held 900] [memory sqlite ...]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import tempfile
import time
from contextlib import ExitStack
from typing import TYPE_CHECKING

from mcp_tasks import (
    ANY_OWNER,
    NewTask,
    StoreOptions,
    drop_namespace,
    namespaced_url,
    new_task_id,
    store_from_url,
)
from mcp_tasks_mongodb.provision import embedded_mongodb

if TYPE_CHECKING:
    from mcp_tasks import Store

OWNERS = 50
BACKENDS = ("memory", "sqlite", "postgres", "redis", "mongodb")


def urls(stack: ExitStack, wanted: list[str]) -> dict[str, str]:
    """A server URL per wanted backend this machine has."""
    found: dict[str, str] = {}
    for name in wanted:
        if name == "memory":
            found[name] = "memory://"
        elif name == "sqlite":
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="ownercap-"))
            found[name] = f"sqlite:///{folder}/tasks.db"
        elif name == "postgres" and os.environ.get("MCP_TASKS_TEST_POSTGRES_URL"):
            found[name] = os.environ["MCP_TASKS_TEST_POSTGRES_URL"]
        elif name == "redis" and os.environ.get("MCP_TASKS_TEST_REDIS_URL"):
            found[name] = os.environ["MCP_TASKS_TEST_REDIS_URL"]
        elif name == "mongodb":
            url = os.environ.get("MCP_TASKS_TEST_MONGODB_URL") or stack.enter_context(
                embedded_mongodb()
            )
            if url:
                found[name] = url
    return found


def task(owner: str) -> NewTask:
    return NewTask(new_task_id(), owner=owner, ttl_ms=3_600_000, status_message="working")


async def timed(store: Store, owners: list[str]) -> tuple[float, float, list[str]]:
    """Wall and CPU seconds of one create per owner, one at a time; the new ids."""
    made = [task(owner) for owner in owners]
    wall, cpu = time.perf_counter(), time.process_time()
    for new in made:
        await store.create(new)
    return time.perf_counter() - wall, time.process_time() - cpu, [t.task_id for t in made]


async def measure(url: str, ops: int, rounds: int, held: int) -> dict[str, dict[str, float]]:
    run = "ownercap_" + secrets.token_hex(3)
    namespaced = url if url == "memory://" else None
    sides: dict[str, Store] = {}
    for side, options in (("on", StoreOptions()), ("off", StoreOptions(max_active_per_owner=None))):
        where = namespaced or namespaced_url(url, f"{run}_{side}")
        sides[side] = store_from_url(where, options)
    try:
        room = (StoreOptions().max_active_per_owner or held + ops) - held
        busy = ["busy"] * min(ops, room)  # the "on" side refuses past the cap
        spread = [f"principal{i % OWNERS}" for i in range(ops)]
        for store in sides.values():
            # 10 at a time: creates queue for the namespace's create lock on MongoDB,
            # within the store's 5 s bound on waiting even on the slow embedded server
            for start in range(0, held, 10):
                batch = [task("busy") for _ in range(min(10, held - start))]
                await asyncio.gather(*(store.create(t) for t in batch))
            await timed(store, spread[: min(ops, 100)])  # warm-up: connections, statements
        out: dict[str, dict[str, float]] = {}
        for name, owners in (("spread", spread), ("busy", busy)):
            walls: list[float] = []
            cpus: list[float] = []
            for round_ in range(rounds):
                got: dict[str, tuple[float, float]] = {}
                order = ("on", "off") if round_ % 2 == 0 else ("off", "on")
                for side in order:
                    wall, cpu, ids = await timed(sides[side], owners)
                    got[side] = (wall, cpu)
                    if name == "busy":  # back to ``held`` active tasks
                        for task_id in ids:
                            await sides[side].cancel(task_id, ANY_OWNER)
                walls.append(got["off"][0] / got["on"][0])  # creates/s on ÷ off
                cpus.append(got["on"][1] / got["off"][1])  # CPU per create on ÷ off
            out[name] = {
                "rate_ratio": statistics.median(walls),
                "cpu_ratio": statistics.median(cpus),
            }
        return out
    finally:
        for store in sides.values():
            await store.close()
        if namespaced is None:
            for side in sides:
                await drop_namespace(namespaced_url(url, f"{run}_{side}"))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--held", type=int, default=900)
    parser.add_argument("backends", nargs="*", default=list(BACKENDS))
    args = parser.parse_args()
    with ExitStack() as stack:
        for name, url in urls(stack, args.backends).items():
            load = os.getloadavg()[0]
            result = await measure(url, args.ops, args.rounds, args.held)
            for population, ratios in result.items():
                print(
                    f"{name:8} {population:6} creates/s on/off {ratios['rate_ratio']:.2f}  "
                    f"CPU per create on/off {ratios['cpu_ratio']:.2f}  (load {load:.1f})",
                    flush=True,
                )


if __name__ == "__main__":
    asyncio.run(main())
