"""A store outage under a steady load of creates and polls: the store's own server (a Redis
and a PostgreSQL of the test's own, killed hard; a SQLite file another process locks) goes
away for a few seconds and comes back. Every answer comes within the store's bound (+
slack), as a result or -32603 "Task store unavailable"; nothing acknowledged is lost; the
server keeps serving; creates work again within a second of the store's return; the log
names the store once and says when it is back."""

from __future__ import annotations

import logging
import subprocess
import sys
import tempfile
import time
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx2 as httpx
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks import Tasks
from mcp_tasks.stores.opening import describe_store, with_query
from mcp_tasks.testing import RawClient, running_asgi
from mcp_tasks_contract.store_servers import provided
from mcp_tasks_mongodb.provision import own_mongodb
from mcp_tasks_postgres.provision import embedded_postgres
from mcp_tasks_redis.provision import own_redis

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator

pytestmark = pytest.mark.anyio

BOUND_MS = 1_000
#: Generous, for a loaded machine: what is promised is "the bound, not the driver's".
SLACK_S = 3.0
#: How long the store stays away.
OUTAGE_S = 2.5
#: Creates work again this soon after the store is back, plus one request's own time.
BACK_WITHIN_S = 1.0
UNAVAILABLE = {"code": -32603, "message": "Task store unavailable"}
TASKS_CAPS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


@dataclass
class Outage:
    """A store server the test controls: its URL, and how to take it away and back."""

    url: str
    stop: Callable[[], None]
    start: Callable[[], None]


@dataclass
class Load:
    """What the steady load saw: each answer's (start, seconds, kind), acknowledged ids."""

    answers: list[tuple[float, float, str, Any]] = field(default_factory=list)
    acknowledged: list[str] = field(default_factory=list)


@contextmanager
def redis_outage() -> Iterator[Outage]:
    # appendfsync always: an acknowledged create is on disk before the reply.
    with provided(own_redis({"appendonly": "yes", "appendfsync": "always"})) as server:
        yield Outage(server.url, server.kill, server.start)


@contextmanager
def postgres_outage() -> Iterator[Outage]:
    with embedded_postgres() as server:
        if server is None:
            pytest.skip("the embedded-postgres test dependency is not installed")
        yield Outage(server.url, server.kill, server.start)


@contextmanager
def mongodb_outage() -> Iterator[Outage]:
    # sync_on_commit: an acknowledged create is on disk before the reply.
    with own_mongodb(sync_on_commit=True) as server:
        if server is None:
            pytest.skip("the SecantusDB test dependency is not installed")

        def start() -> None:
            # Back once it answers: a Python server just started (journal read, replica set
            # primary named) may take a while to, on a loaded machine, after printing its URI.
            import pymongo  # noqa: PLC0415 (the MongoDB store's dependency)

            server.start()
            client: pymongo.MongoClient[Any] = pymongo.MongoClient(
                server.url, serverSelectionTimeoutMS=30_000
            )
            try:
                client.admin.command("ping")
            finally:
                client.close()

        yield Outage(server.url, server.kill, start)


LOCKER = """
import sqlite3, sys
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.read()
"""


@contextmanager
def sqlite_outage() -> Iterator[Outage]:
    with tempfile.TemporaryDirectory(prefix="mcp-tasks-outage-") as directory:
        path = Path(directory) / "tasks.db"
        locker: list[subprocess.Popen[str]] = []

        def stop() -> None:  # another process takes the file's write lock and holds it
            process = subprocess.Popen(
                [sys.executable, "-c", LOCKER, str(path)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert process.stdout is not None
            assert process.stdout.readline().strip() == "locked"
            locker.append(process)

        def start() -> None:  # that process ends: SQLite releases its lock
            process = locker.pop()
            process.kill()
            process.communicate()  # waits, and closes its pipes

        yield Outage(f"sqlite:///{path}", stop, start)
        while locker:
            start()


OUTAGES = {
    "redis": redis_outage,
    "postgres": postgres_outage,
    "sqlite": sqlite_outage,
    "mongodb": mongodb_outage,
}


def build_server(tasks: Tasks) -> MCPServer[Any]:
    mcp: MCPServer[Any] = MCPServer(
        "outage", extensions=[tasks.extension()], lifespan=tasks.lifespan
    )

    @tasks.tool(mcp, mode="required")
    async def quick() -> str:
        return "done"

    return mcp


@asynccontextmanager
async def serving(url: str) -> AsyncIterator[tuple[Tasks, RawClient]]:
    tasks = Tasks(store=with_query(url, timeout_ms=str(BOUND_MS)), close_store=True)
    app = build_server(tasks).streamable_http_app()
    async with running_asgi(app) as served, httpx.AsyncClient(timeout=60) as http:
        yield tasks, RawClient(http, served)


def answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC answer; anything else (a 5xx, a body that is no JSON) as it came."""
    if response.status_code != 200:
        return {"http": response.status_code, "body": response.text[:300]}
    decoded: dict[str, Any] = response.json()
    return decoded


async def steady_load(client: RawClient, load: Load, stop: anyio.Event) -> None:
    """One client's loop: a create, then a poll of the last acknowledged task."""
    while not stop.is_set():
        started = time.monotonic()
        reply = answer(await client.post("tools/call", {"name": "quick"}))
        load.answers.append((started, time.monotonic() - started, "create", reply))
        if "result" in reply:
            load.acknowledged.append(reply["result"]["taskId"])
        if load.acknowledged:
            started = time.monotonic()
            reply = answer(await client.post("tasks/get", {"taskId": load.acknowledged[-1]}))
            load.answers.append((started, time.monotonic() - started, "get", reply))
        await anyio.sleep(0.05)


def said(caplog: pytest.LogCaptureFixture, start: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(start)]


@pytest.mark.parametrize("backend", list(OUTAGES))
async def test_a_store_outage_under_load(backend: str, caplog: pytest.LogCaptureFixture) -> None:
    """Two clients create and poll without pause while the store goes away for 2.5 s and
    comes back: see the module docstring for what is checked."""
    caplog.set_level(logging.INFO, logger="mcp_tasks")
    load = Load()
    with OUTAGES[backend]() as outage:
        async with serving(outage.url) as (tasks, client):
            stop = anyio.Event()
            async with anyio.create_task_group() as group:
                for _ in range(2):
                    group.start_soon(steady_load, client, load, stop)
                with anyio.fail_after(60):  # a store that starts slowly is not the outage
                    while not load.acknowledged:  # noqa: ASYNC110
                        await anyio.sleep(0.05)
                load.answers.clear()
                await anyio.sleep(1.0)
                down_at = time.monotonic()
                await anyio.to_thread.run_sync(outage.stop)
                await anyio.sleep(OUTAGE_S)
                await anyio.to_thread.run_sync(outage.start)
                back_at = time.monotonic()
                with anyio.fail_after(30):
                    while not any(  # noqa: ASYNC110 (the load's answers are the signal)
                        s >= back_at and kind == "create" and "result" in r
                        for s, _, kind, r in load.answers
                    ):
                        await anyio.sleep(0.05)
                await anyio.sleep(0.5)
                stop.set()
            name = describe_store(tasks.store)
            lost = []
            for task_id in load.acknowledged:
                reply = (await client.post("tasks/get", {"taskId": task_id})).json()
                if "result" not in reply:
                    lost.append(reply)
    assert not lost, f"{len(lost)} acknowledged tasks lost: {lost[:3]}"
    for _, seconds, kind, reply in load.answers:
        assert seconds < BOUND_MS / 1000 + SLACK_S, f"{kind} answered after {seconds:.1f} s"
        assert "result" in reply or reply.get("error") == UNAVAILABLE, reply
    refused = [(s, s + d) for s, d, _, r in load.answers if "error" in r]
    assert refused, "the outage was seen"
    # Refused only while the store was away: answered after it went, asked before it had
    # been back for BACK_WITHIN_S.
    late = [
        (s - back_at, e - down_at) for s, e in refused if e < down_at or s > back_at + BACK_WITHIN_S
    ]
    assert not late, f"refused while the store was there: {late}"
    first_create = min(
        s + d
        for s, d, kind, r in load.answers
        if s >= back_at and kind == "create" and "result" in r
    )
    assert first_create - back_at <= BACK_WITHIN_S + SLACK_S / 3, (
        f"creates worked again {first_create - back_at:.2f} s after the store was back"
    )
    for kind in ("creating tasks", "tasks/get"):
        if backend == "sqlite" and kind == "tasks/get":
            continue  # reads go on while another process holds the write lock
        lines = said(caplog, kind)
        assert len(lines) == 2, lines  # once when it fails, once when it is back
        failed, again = lines
        assert failed.startswith(f"{kind} failed: the task store {name} is unavailable (")
        assert again.startswith(f"{kind} works again: the task store {name} is back after ")
