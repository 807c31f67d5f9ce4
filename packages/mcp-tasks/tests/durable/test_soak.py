"""A soak: ``SOAK_TASKS`` tasks created, completed and reaped on one ``mcp-tasks serve``
process (memory, SQLite, Postgres), whose Python memory in use (``tracemalloc``'s traced
memory, after a full collection) at the end is within ``GROWTH`` of its level after the
first ``WARM_TASKS``.

Each task carries a ``PAYLOAD_BYTES`` token in its arguments and its result, so a process
that kept anything of every finished task (a record, its result, its arguments) would grow
by at least ``PAYLOAD_BYTES`` per task: ``(SOAK_TASKS - WARM_TASKS) * PAYLOAD_BYTES``
(400 x 40 KiB, 15.6 MiB) is several times ``GROWTH`` of the server's Python memory (10 %
of 40 to 60 MiB), which is why this size shows a leak.
Tasks live ``soak_app.TTL_MS`` and results are not kept past it, so reaping keeps the store
at the last few seconds of tasks; both levels are read once the store has reaped every task
(how many are alive at once depends on the machine's speed, what a leak keeps does not).

Traced memory, not resident: what the C allocator keeps of memory Python freed (glibc's
heap, which a loaded machine's timing fragments differently run to run) is no leak of ours,
and resident size counts it. ``MCP_TASKS_SOAK_TASKS=N`` runs N tasks (the bench runs
20,000).
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

import anyio
import httpx2 as httpx
import pytest

from mcp_tasks.testing import RawClient

if TYPE_CHECKING:
    from conftest import Processes

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SOAK_TASKS = int(os.environ.get("MCP_TASKS_SOAK_TASKS") or 900)
WARM_TASKS = 500
GROWTH = 0.10
PAYLOAD_BYTES = 40_960
#: Requests in flight at once: enough to keep the server busy, few enough for 2 cores.
CONCURRENCY = 8
#: Creates per second at most: the tasks alive at once (this x soak_app.TTL_MS, 400) are
#: all there before the first ``WARM_TASKS`` end, so the level measured then is the steady
#: one. A loaded machine only runs slower, with fewer alive. (Every task costs the server
#: CPU; the leak the size must show is the last ``SOAK_TASKS - WARM_TASKS`` tasks' alone.)
MAX_RATE = 50
#: The body is instant: the first poll, this long after the create, finds it done.
FIRST_POLL_S = 0.02


#: Generous, for a loaded machine: the last tasks expire ``soak_app.TTL_MS`` after they were
#: created, and the reaper deletes them within ``soak_app.REAP_S`` of that.
DRAINED_WITHIN_S = 120


async def held(client: RawClient, *, traced: bool = True) -> dict[str, int]:
    """What the server holds now (``soak_app.held``): its store's rows and, with
    ``traced``, its traced bytes."""
    arguments = {"traced": traced}
    reply = await client.call("tools/call", {"name": "held", "arguments": arguments})
    assert "result" in reply, f"held answered {reply}"
    figures: dict[str, int] = reply["result"]["structuredContent"]
    return figures


async def drained(client: RawClient) -> int:
    """The server's traced bytes once its store has reaped every task."""
    with anyio.fail_after(DRAINED_WITHIN_S):
        while (await held(client, traced=False))["rows"]:  # noqa: ASYNC110 (another process)
            await anyio.sleep(0.5)  # the reaper's pace: it runs every soak_app.REAP_S
    return (await held(client))["traced"]


async def soak(client: RawClient, numbers: range) -> None:
    """Create a task for each of ``numbers`` through ``CONCURRENCY`` clients, each polled
    until completed with its own token."""
    pending = iter(numbers)
    started = anyio.current_time()

    async def one_by_one() -> None:
        for number in pending:
            await anyio.sleep_until(started + (number - numbers.start) / MAX_RATE)
            token = f"{number}:" + "x" * PAYLOAD_BYTES
            created = await client.call(
                "tools/call", {"name": "echo", "arguments": {"token": token}}
            )
            task_id = created["result"]["taskId"]
            while True:
                await anyio.sleep(FIRST_POLL_S)
                got = await client.call("tasks/get", {"taskId": task_id})
                assert "error" not in got, f"tasks/get answered {got['error']}"
                if got["result"]["status"] != "working":
                    break
            assert got["result"]["status"] == "completed", got
            assert got["result"]["result"]["structuredContent"] == {"result": token}

    async with anyio.create_task_group() as clients:
        for _ in range(CONCURRENCY):
            clients.start_soon(one_by_one)


async def test_python_memory_stays_flat_over_a_soak(
    soak_store_url: str, soak_processes: Processes
) -> None:
    """``SOAK_TASKS`` tasks with a 40 KiB token each, created, completed and reaped: the
    store holds no more than the last few seconds of tasks when they are done, and once it
    has reaped them all the server's Python memory is within 10 % of its level after the
    first ``WARM_TASKS`` (reaped too)."""
    server = await soak_processes.serve(
        "soak_app:mcp", SOAK_STORE_URL=soak_store_url, PYTHONTRACEMALLOC="1"
    )
    assert server.url is not None
    started = time.monotonic()
    async with httpx.AsyncClient(timeout=httpx.Timeout(60)) as http:
        client = RawClient(http, server.url)
        await soak(client, range(WARM_TASKS))
        warm = await drained(client)
        await soak(client, range(WARM_TASKS, SOAK_TASKS))
        rows = (await held(client, traced=False))["rows"]
        end = await drained(client)
    took_s = time.monotonic() - started
    assert warm > 0, "the server does not trace its memory (PYTHONTRACEMALLOC)"
    growth = end / warm - 1
    print(
        f"soak {soak_store_url.partition(':')[0]}: {SOAK_TASKS} tasks in {took_s:.1f}s, "
        f"traced {warm / 2**20:.1f} MiB after {WARM_TASKS}, {end / 2**20:.1f} MiB at the "
        f"end ({growth:+.1%}), {rows} rows when done"
    )
    # Reaping keeps up: what is left is a few seconds of tasks, not the run.
    assert rows < WARM_TASKS, f"{rows} tasks left in the store"
    assert growth <= GROWTH, f"traced memory grew {growth:.1%} after the first {WARM_TASKS}"
