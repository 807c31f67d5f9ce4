"""No answer waits on TCP: wherever we serve (``mcp-tasks serve``, the conformance fixture
server, :func:`mcp_tasks.testing.running`), a client on one kept-alive connection gets each
answer, and each message of a ``subscriptions/listen`` stream, as soon as it is written.

With Nagle's algorithm on the server's connections, an answer written in parts (headers,
then body) waits for the client's delayed ACK: at least 40 ms on Linux, every time. A loaded
machine slows some answers by more than that, never every one of them: so the quickest of
``ROUNDS`` answers is held to a small fraction of a delayed ACK, which a stall exceeds always
and load never.
"""

from __future__ import annotations

import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx2 as httpx
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks import Tasks
from mcp_tasks.testing import RawClient, running

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from conftest import Processes

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.parametrize("every_store_url", ["memory"], indirect=True),
]

CONFORMANCE_SERVER = Path(__file__).resolve().parents[4] / "conformance" / "server.py"
#: A small fraction of a delayed ACK, yet many times what an answer takes.
NOT_HELD_S = 0.015
ROUNDS = 20


def in_process_server() -> MCPServer[Any]:
    """The tools these tests call, for :func:`running`."""
    tasks = Tasks()
    mcp: MCPServer[Any] = MCPServer(
        "no-stall", extensions=[tasks.extension()], lifespan=tasks.lifespan
    )

    @tasks.tool(mcp, mode="required")
    async def slow(seconds: float) -> str:
        await anyio.sleep(seconds)
        return "slept"

    return mcp


@asynccontextmanager
async def served(how: str, processes: Processes) -> AsyncIterator[tuple[str, str]]:
    """The /mcp URL of a server started ``how``, and its tool that runs for ``seconds``."""
    if how == "mcp-tasks serve":
        started = await processes.serve()
        assert started.url is not None
        yield started.url, "slow"
    elif how == "conformance/server.py":
        started = await processes.start(
            [sys.executable, str(CONFORMANCE_SERVER), "--store", "memory://", "--port", "0"]
        )
        assert started.url is not None
        yield started.url, "slow_compute"
    else:
        async with running(in_process_server()) as url:
            yield url, "slow"


async def create(client: RawClient, tool: str, arguments: dict[str, Any]) -> str:
    reply = await client.call("tools/call", {"name": tool, "arguments": arguments})
    assert "taskId" in reply.get("result", {}), f"the create answered {reply}"
    task_id: str = reply["result"]["taskId"]
    return task_id


async def finished(client: RawClient, task_id: str) -> bool:
    got = await client.call("tasks/get", {"taskId": task_id})
    return bool(got["result"]["status"] == "completed")


@pytest.mark.parametrize(
    "how", ["mcp-tasks serve", "conformance/server.py", "mcp_tasks.testing.running"]
)
async def test_answers_on_a_kept_alive_connection_are_not_held_back(
    how: str, every_store_processes: Processes
) -> None:
    """Sequential tasks/get of a working task on one kept-alive connection: the quickest
    answer comes well within a delayed ACK (stalled, every one takes 40 ms or more)."""
    async with (
        served(how, every_store_processes) as (url, tool),
        httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=1)) as http,
    ):
        client = RawClient(http, url)
        task_id = await create(client, tool, {"seconds": 600})
        took: list[float] = []
        for _ in range(ROUNDS):
            started = time.perf_counter()
            got = await client.call("tasks/get", {"taskId": task_id})
            took.append(time.perf_counter() - started)
            assert got["result"]["status"] == "working"
    shown = ", ".join(f"{s * 1000:.1f}" for s in took)
    assert min(took) < NOT_HELD_S, f"answers took {shown} ms"


async def test_each_message_of_a_listen_stream_is_sent_at_once(
    every_store_processes: Processes,
) -> None:
    """``mcp-tasks serve``, one kept-alive connection: a listen on a finished task, round
    after round, is its acknowledgment, the task's state and the end of the stream; the
    quickest round has all three well within a delayed ACK (stalled, every round waits for
    one before its first message)."""
    server = await every_store_processes.serve()
    assert server.url is not None
    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=1)) as http:
        client = RawClient(http, server.url)
        task_id = await create(client, "marked", {"token": "done", "seconds": 0})
        with anyio.fail_after(30):
            while not await finished(client, task_id):  # noqa: ASYNC110 (another process)
                await anyio.sleep(0.01)
        took: list[float] = []
        listen = {"notifications": {"taskIds": [task_id]}}
        for _ in range(ROUNDS):
            started = time.perf_counter()
            messages = []
            async with client.stream("subscriptions/listen", listen) as stream:
                while (message := await stream.next()) is not None:
                    messages.append(message)
            took.append(time.perf_counter() - started)
            kinds = [m.get("method", "result") for m in messages]
            assert kinds == [
                "notifications/subscriptions/acknowledged",
                "notifications/tasks",
                "result",
            ]
    shown = ", ".join(f"{s * 1000:.1f}" for s in took)
    assert min(took) < NOT_HELD_S, f"listen streams took {shown} ms"
