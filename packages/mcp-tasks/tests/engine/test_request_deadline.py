"""One deadline per request: a request that calls the store several times (a capped create,
which on MongoDB takes the namespace's create lock; an update that reads the task first; a
cancel and its change signal; a read) answers -32603 "Task store unavailable" within the
store's bound counted from when it was sent, whatever the store, while the store's server
is away behind a TCP proxy the test stops: refused (a killed server), silent (a hung one)
or slow (each round trip takes most of the bound: a request that calls the store twice
took a bound per call). None waits for the store to come back: the proxy stays stopped
well past the bound. SQLite's outage is its file locked by another process."""

from __future__ import annotations

import faulthandler
import secrets
import subprocess
import sys
import tempfile
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx2 as httpx
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks import TaskContext, Tasks, drop_namespace, namespaced_url
from mcp_tasks.stores.opening import with_query
from mcp_tasks.testing import RawClient, running_asgi
from mcp_tasks_contract.proxy import Outage, StoppableProxy, through

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator


pytestmark = pytest.mark.anyio

UNAVAILABLE = {"code": -32603, "message": "Task store unavailable"}
#: The store's bound the tests set (``?timeout_ms=``).
BOUND_MS = 3_000
#: What a request may take beyond the bound on a loaded machine: less than the bound, so a
#: request that waits a bound per store call (two calls: twice the bound) fails.
MARGIN_S = 2.0
#: A slow server's round trip: most of the bound (two in a row are more than the bound).
SLOW_S = 0.85 * BOUND_MS / 1000
#: The store stays away this long after the requests are sent: a request answered only once
#: it is back would be late by far.
OUTAGE_S = BOUND_MS / 1000 + MARGIN_S + 2.0
#: Requests are sent in waves this far apart (10 creates a second, as the issue measured).
WAVES, WAVE_GAP_S, CREATES_PER_WAVE = 3, 0.3, 3
#: The hard outer bound on one test, its server's start and the teardown included: far
#: past what a passing test takes (~10 s), so only a hang reaches it.
HANG_S = 120.0


@pytest.fixture(autouse=True)
def fails_instead_of_hanging() -> Iterator[None]:
    """A test still running after :data:`HANG_S` ends its process with every thread's
    traceback (a shielded driver call no cancel scope reaches is ended too): the run
    reports it failed (xdist: its worker crashed) instead of hanging. The tracebacks go to
    a file in the temporary directory (pytest's capture of stderr dies with the process)."""
    with (Path(tempfile.gettempdir()) / "mcp-tasks-request-deadline-hang.txt").open("w") as log:
        faulthandler.dump_traceback_later(HANG_S, exit=True, file=log)
        try:
            yield
        finally:
            faulthandler.cancel_dump_traceback_later()


def build_server(tasks: Tasks) -> MCPServer[Any]:
    mcp: MCPServer[Any] = MCPServer(
        "deadline", extensions=[tasks.extension()], lifespan=tasks.lifespan
    )

    @tasks.tool(mcp, mode="required")
    async def ask(ctx: TaskContext) -> str:
        return str(await ctx.elicit("name", "Name?"))

    return mcp


@asynccontextmanager
async def serving(url: str) -> AsyncIterator[RawClient]:
    """The store at ``url`` (with the test's bound, capped as by default) served over HTTP."""
    tasks = Tasks(store=with_query(url, timeout_ms=str(BOUND_MS)), close_store=True)
    app = build_server(tasks).streamable_http_app()
    async with running_asgi(app) as served, httpx.AsyncClient(timeout=120) as http:
        yield RawClient(http, served)


def each_request(task_id: str) -> list[tuple[str, dict[str, Any]]]:
    """One wave: capped creates, an update whose odd answer makes the engine read the task
    before it writes, a cancel (a write and its change signal), a read."""
    return [
        *[("tools/call", {"name": "ask"})] * CREATES_PER_WAVE,
        ("tasks/update", {"taskId": task_id, "inputResponses": {"other": "not an object"}}),
        ("tasks/cancel", {"taskId": task_id}),
        ("tasks/get", {"taskId": task_id}),
    ]


async def sent_during_the_outage(
    client: RawClient,
    task_id: str,
    stop: Callable[[], Awaitable[None]],
    resume: Callable[[], Awaitable[None]],
) -> list[tuple[str, float, Any]]:
    """Stop the store, send the waves, bring the store back :data:`OUTAGE_S` after the
    last wave; each request's (method, seconds from sending to its answer, answer)."""
    answers: list[tuple[str, float, Any]] = []

    async def one(method: str, params: dict[str, Any]) -> None:
        sent = time.monotonic()
        reply = await client.post(method, params)
        answers.append((method, time.monotonic() - sent, reply.json()))

    await stop()
    try:
        async with anyio.create_task_group() as group:
            for wave in range(WAVES):
                if wave:
                    await anyio.sleep(WAVE_GAP_S)
                for method, params in each_request(task_id):
                    group.start_soon(one, method, params)
            await anyio.sleep(OUTAGE_S)
            await resume()
    finally:
        await resume()
    return answers


def assert_each_answered_within_the_bound(
    answers: list[tuple[str, float, Any]], *, reads_go_on: bool = False, slow: bool = False
) -> None:
    """Every answer within the bound + margin; -32603 each (a read: its result, where
    ``reads_go_on``; on a ``slow`` store, a request that needs one round trip may get its
    result, the update, which needs two in a row, may not)."""
    assert len(answers) == WAVES * len(each_request("x"))
    late = [(method, round(seconds, 2)) for method, seconds, _ in answers if seconds >= limit()]
    assert not late, f"answered after more than {limit():.1f} s from sending: {late}"
    for method, _, reply in answers:
        if (reads_go_on and method == "tasks/get") or (slow and method != "tasks/update"):
            assert "result" in reply or reply.get("error") == UNAVAILABLE, (method, reply)
        else:
            assert reply.get("error") == UNAVAILABLE, (method, reply)


def limit() -> float:
    return BOUND_MS / 1000 + MARGIN_S


async def first_task(client: RawClient) -> str:
    """A task created while the store is there, and read by as many requests at once as
    the outage sends: the store's connections are open (on a slow store a new one would
    take several round trips, a read on an open one takes one)."""
    reply = (await client.post("tools/call", {"name": "ask"})).json()
    task_id: str = reply["result"]["taskId"]

    async def read() -> None:  # its answer is no part of the test: a loaded machine is slow
        await client.post("tasks/get", {"taskId": task_id})

    async with anyio.create_task_group() as group:
        for _ in range(WAVES * len(each_request(task_id))):
            group.start_soon(read)
    return task_id


@pytest.mark.parametrize("outage", ["refused", "silent", "slow"])
@pytest.mark.parametrize("backend", ["postgres", "redis", "mongodb"])
async def test_each_request_fails_within_one_bound_from_its_sending(
    backend: str, outage: Outage, request: pytest.FixtureRequest
) -> None:
    """The store's server goes away behind a proxy (refused, silent or slow) and stays away:
    every request sent meanwhile, each calling the store more than once, answers -32603
    (or, slow, where one round trip does, its result) within the bound (+ margin) from its
    sending, not a bound per store call nor when the store is back."""
    server_url: str = request.getfixturevalue(f"{backend}_url")
    url = namespaced_url(server_url, "mcpt_deadline_" + secrets.token_hex(4))
    try:
        async with (
            StoppableProxy.to(url) as proxy,
            serving(through(url, proxy)) as client,
        ):
            task_id = await first_task(client)
            answers = await sent_during_the_outage(
                client, task_id, lambda: proxy.stop(outage, delay_s=SLOW_S), proxy.resume
            )
    finally:
        await drop_namespace(url)
    assert_each_answered_within_the_bound(answers, slow=outage == "slow")


LOCKER = """
import sqlite3, sys
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.read()
"""


async def test_sqlite_each_request_fails_within_one_bound_from_its_sending(
    tmp_path: Path,
) -> None:
    """SQLite's outage: another process holds the file's write lock. Every write sent
    meanwhile answers -32603 within the bound (+ margin) from its sending, none when the
    lock is gone; reads go on (WAL)."""
    path = tmp_path / "tasks.db"
    locker: list[subprocess.Popen[str]] = []

    def lock() -> None:
        process = subprocess.Popen(
            [sys.executable, "-c", LOCKER, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        locker.append(process)
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "locked"

    async def stop() -> None:
        await anyio.to_thread.run_sync(lock)

    async def resume() -> None:
        while locker:
            process = locker.pop()
            process.kill()
            await anyio.to_thread.run_sync(process.communicate)

    async with serving(f"sqlite:///{path}") as client:
        task_id = await first_task(client)
        answers = await sent_during_the_outage(client, task_id, stop, resume)
    assert_each_answered_within_the_bound(answers, reads_go_on=True)
