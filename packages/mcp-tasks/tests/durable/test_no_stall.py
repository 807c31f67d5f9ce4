"""No answer waits on TCP: wherever we serve (``mcp-tasks serve``, the conformance fixture
server, :func:`mcp_tasks.testing.running`), a client on one kept-alive connection gets each
answer, and each event of a ``subscriptions/listen`` stream, as soon as it is written.

With Nagle's algorithm on the server's connections, an answer written in parts (headers,
then body) or an event written soon after another waits for the client's delayed ACK: at
least 40 ms on Linux, every time. The bound here is a small fraction of that, on the median
of several, so a loaded machine's occasional slow turn does not fail it and a stall does.
"""

from __future__ import annotations

import statistics
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
#: A small fraction of a stall, yet many times what an answer takes on a loaded machine.
NOT_HELD_S = 0.015
REQUESTS = 9
TICKS = 10


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


@pytest.mark.parametrize(
    "how", ["mcp-tasks serve", "conformance/server.py", "mcp_tasks.testing.running"]
)
async def test_answers_on_a_kept_alive_connection_are_not_held_back(
    how: str, every_store_processes: Processes
) -> None:
    """Sequential tasks/get of a working task on one kept-alive connection: the median
    answer comes well within a delayed ACK (a stalled one takes 40 ms or more)."""
    async with (
        served(how, every_store_processes) as (url, tool),
        httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=1)) as http,
    ):
        client = RawClient(http, url)
        task_id = await create(client, tool, {"seconds": 600})
        took: list[float] = []
        for _ in range(REQUESTS):
            started = time.perf_counter()
            got = await client.call("tasks/get", {"taskId": task_id})
            took.append(time.perf_counter() - started)
            assert got["result"]["status"] == "working"
    shown = ", ".join(f"{s * 1000:.1f}" for s in took)
    assert statistics.median(took) < NOT_HELD_S, f"answers took {shown} ms"


async def test_each_event_of_a_listen_stream_is_sent_at_once(
    every_store_processes: Processes,
) -> None:
    """``mcp-tasks serve``: a task reports progress in quick succession, each report with
    the wall time it was made; on a listen stream opened at once, the median report
    arrives well within a delayed ACK of being made (held back, the reports of the
    stream's first 40 ms or more would wait for the ACK of its first bytes)."""
    server = await every_store_processes.serve()
    assert server.url is not None
    async with httpx.AsyncClient(timeout=30) as http:
        client = RawClient(http, server.url)
        task_id = await create(client, "ticking", {"ticks": TICKS, "gap_s": 0.002})
        late: dict[str, float] = {}
        listen = {"notifications": {"taskIds": [task_id]}}
        async with client.stream("subscriptions/listen", listen) as stream:
            while (message := await stream.next()) is not None:
                arrived = time.time()
                state = message.get("params", {})
                reported = state.get("statusMessage", "")
                if state.get("status") == "working" and reported[:1].isdigit():
                    # Sent again with a later change, a report counts once: when it came.
                    late.setdefault(reported, arrived - float(reported.split()[0]))
    assert len(late) >= 3, f"only {len(late)} progress reports arrived"
    shown = ", ".join(f"{s * 1000:.1f}" for s in late.values())
    assert statistics.median(late.values()) < NOT_HELD_S, (
        f"reports arrived {shown} ms after they were made"
    )
