"""A soak: ``SOAK_TASKS`` tasks created, completed and reaped on one ``mcp-tasks serve``
process (memory, SQLite, Postgres), whose resident memory (``VmRSS``, from /proc) at the end
is within ``GROWTH`` of its level after the first ``WARM_TASKS``.

Each task carries a ``PAYLOAD_BYTES`` token in its arguments and its result, so a process
that kept anything of every finished task (a record, its result, its arguments) would grow
by at least ``PAYLOAD_BYTES`` per task: ``(SOAK_TASKS - WARM_TASKS) * PAYLOAD_BYTES`` is
several times ``GROWTH`` of the server's size, which is why this size shows a leak.
Tasks live ``soak_app.TTL_MS`` and results are not kept past it, so reaping keeps the store
at the last few seconds of tasks. ``MCP_TASKS_SOAK_TASKS=N`` runs N tasks (the bench runs
20,000).
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import anyio
import asyncpg
import httpx2 as httpx
import pytest

from mcp_tasks.testing import RawClient

if TYPE_CHECKING:
    from conftest import Processes

pytestmark = pytest.mark.anyio

SOAK_TASKS = int(os.environ.get("MCP_TASKS_SOAK_TASKS") or 2_000)
WARM_TASKS = 1_000
GROWTH = 0.10
PAYLOAD_BYTES = 16_384
#: Requests in flight at once: enough to keep the server busy, few enough for 2 cores.
CONCURRENCY = 8
#: Creates per second at most: the tasks alive at once (this x soak_app.TTL_MS, 800) are
#: all there before the first ``WARM_TASKS`` end, so the level measured then is the steady
#: one. A loaded machine only runs slower, with fewer alive.
MAX_RATE = 100
#: The body is instant: the first poll, this long after the create, finds it done.
FIRST_POLL_S = 0.02


def resident_bytes(pid: int) -> int:
    """``VmRSS`` of process ``pid``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


async def stored_rows(store_url: str) -> int | None:
    """How many tasks the SQL store still holds (``None`` for the memory store: only its
    process can tell, and its resident memory does)."""
    if store_url.startswith("sqlite:///"):
        with sqlite3.connect(store_url.removeprefix("sqlite:///")) as db:
            table = next(
                name
                for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")
                if name.endswith("tasks")
            )
            (count,) = db.execute(f'SELECT count(*) FROM "{table}"').fetchone()
            return int(count)
    if store_url.startswith("postgresql://"):
        address = urlsplit(store_url)
        query = parse_qs(address.query)
        (schema,) = query.pop("schema")
        dsn = urlunsplit(address._replace(query=urlencode(query, doseq=True)))
        connection = await asyncpg.connect(dsn)
        try:
            count = await connection.fetchval(f'SELECT count(*) FROM "{schema}".tasks')
        finally:
            await connection.close()
        return int(count)
    return None


async def soak(url: str, pid: int, n: int) -> tuple[int, int]:
    """Create ``n`` tasks through ``CONCURRENCY`` clients, each polled until completed with
    its own token; the server's resident bytes after the first ``WARM_TASKS`` and at the end."""
    done = 0
    warm_rss = 0
    numbers = iter(range(n))
    # A fresh connection per request: on a kept-alive one each answer waits ~40 ms for the
    # client's delayed ACK, and the soak would measure that instead of the server.
    limits = httpx.Limits(max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=httpx.Timeout(60), limits=limits) as http:
        client = RawClient(http, url)

        started = anyio.current_time()

        async def one_by_one() -> None:
            nonlocal done, warm_rss
            for number in numbers:
                await anyio.sleep_until(started + number / MAX_RATE)
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
                done += 1
                if done == WARM_TASKS:
                    warm_rss = resident_bytes(pid)

        async with anyio.create_task_group() as clients:
            for _ in range(CONCURRENCY):
                clients.start_soon(one_by_one)
    return warm_rss, resident_bytes(pid)


async def test_resident_memory_stays_flat_over_a_soak(
    soak_store_url: str, soak_processes: Processes
) -> None:
    """``SOAK_TASKS`` tasks with a 16 KiB token each, created, completed and reaped: the
    server's resident memory at the end is within 10 % of its level after the first 1,000,
    and the SQL stores hold no more than the last few seconds of tasks."""
    server = await soak_processes.serve("soak_app:mcp", SOAK_STORE_URL=soak_store_url)
    assert server.url is not None
    started = time.monotonic()
    warm, end = await soak(server.url, server.pid, SOAK_TASKS)
    took_s = time.monotonic() - started
    rows = await stored_rows(soak_store_url)
    growth = end / warm - 1
    print(
        f"soak {soak_store_url.partition(':')[0]}: {SOAK_TASKS} tasks in {took_s:.1f}s, "
        f"resident {warm / 2**20:.1f} MiB after {WARM_TASKS}, {end / 2**20:.1f} MiB at the "
        f"end ({growth:+.1%}), {rows} rows left"
    )
    assert growth <= GROWTH, f"resident memory grew {growth:.1%} after the first {WARM_TASKS}"
    if rows is not None:
        # Reaping keeps up: what is left is a few seconds of tasks, not the run.
        assert rows < WARM_TASKS, f"{rows} tasks left in the store"
