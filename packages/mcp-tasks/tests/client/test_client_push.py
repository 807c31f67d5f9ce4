"""`TaskHandle.watch()` follows a task by `notifications/tasks` on a `subscriptions/listen`
stream when the server sends them, and polls `tasks/get` when it does not: counted by the
server, over real HTTP."""

from __future__ import annotations

import json
import logging
from collections import Counter
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks import Tasks
from mcp_tasks.adapters.asgi import asgi_app
from mcp_tasks.cli.demo_tools import BUILD_STEPS, demo_server
from mcp_tasks.client import TaskHandle, TaskState, start_tool, tasks_client
from mcp_tasks.stores.memory import MemoryTaskStore
from mcp_tasks.testing import running_asgi

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping

    Scope = MutableMapping[str, Any]
    Message = MutableMapping[str, Any]
    Receive = Callable[[], Awaitable[Message]]
    Send = Callable[[Message], Awaitable[None]]

pytestmark = pytest.mark.anyio

LISTEN = "subscriptions/listen"


class CountingRequests:
    """ASGI middleware in front of an MCP app: counts the JSON-RPC requests it is sent, by
    method; with `refuse_listen`, answers `subscriptions/listen` -32601 as a server that has
    no such method does."""

    def __init__(self, app: Any, *, refuse_listen: bool = False) -> None:
        self.app = app
        self.refuse_listen = refuse_listen
        self.methods: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        request = json.loads(body) if body else {}
        method = request.get("method") if isinstance(request, dict) else None
        if isinstance(method, str):
            self.methods[method] += 1
        if method == LISTEN and self.refuse_listen:
            error = {"code": -32601, "message": "Method not found"}
            answer = json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "error": error})
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": answer.encode()})
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


@asynccontextmanager
async def serving(
    mcp: MCPServer, *, refuse_listen: bool = False
) -> AsyncIterator[tuple[str, CountingRequests]]:
    counting = CountingRequests(asgi_app(mcp), refuse_listen=refuse_listen)
    async with running_asgi(counting) as url:
        yield url, counting


async def build_states(url: str) -> list[TaskState]:
    """Every state `watch()` yields for the demo build (four progress steps)."""
    async with tasks_client(url) as client:
        handle = await start_tool(client, "build", {"ref": "v1"})
        assert isinstance(handle, TaskHandle)
        with anyio.fail_after(30):
            return [state async for state in handle.watch()]


async def test_a_task_followed_by_push_settles_without_a_single_poll() -> None:
    """On an mcp-tasks server watch() opens one listen stream naming the task and hears
    every step, to completed, with no tasks/get at all."""
    mcp = demo_server(MemoryTaskStore(), step_seconds=0.2, log_level="WARNING")
    async with serving(mcp) as (url, counting):
        states = await build_states(url)
    messages = [s.status_message for s in states if not s.is_terminal]
    steps = [f"{step} ({n}/{len(BUILD_STEPS)})" for n, step in enumerate(BUILD_STEPS, 1)]
    assert [m for m in messages if m in steps] == steps, messages
    assert states[-1].status == "completed"
    assert counting.methods[LISTEN] == 1
    assert counting.methods["tasks/get"] == 0, counting.methods


async def test_a_server_without_listen_is_polled() -> None:
    """A server that answers subscriptions/listen -32601: watch() falls back to polling
    tasks/get and still follows the task to completed."""
    mcp = demo_server(MemoryTaskStore(), step_seconds=0.2, log_level="WARNING")
    async with serving(mcp, refuse_listen=True) as (url, counting):
        states = await build_states(url)
    assert states[-1].status == "completed"
    assert counting.methods[LISTEN] == 1, "tried once, then polled"
    assert counting.methods["tasks/get"] >= 2


async def test_a_server_that_does_not_push_is_polled() -> None:
    """A server with notifications off (`Tasks(notifier=None)`) acknowledges the listen
    stream with no task and ends it: watch() polls on to completed."""
    tasks = Tasks(store=MemoryTaskStore(), notifier=None)
    mcp = MCPServer("quiet", extensions=[tasks.extension()], lifespan=tasks.lifespan)

    @tasks.tool(mcp, poll_interval_ms=50)
    async def build(ref: str) -> str:
        await anyio.sleep(1.5)  # outlives the stream's end and the wait after it
        return f"built {ref}"

    async with serving(mcp) as (url, counting):
        states = await build_states(url)
    assert [s.status for s in states] == ["working", "completed"]
    assert counting.methods[LISTEN] == 1
    assert counting.methods["tasks/get"] >= 1


def sse_forwarding_failed(error: BaseException) -> None:
    """What the SDK's Streamable HTTP transport does when it cannot forward an SSE message
    to its session: log "Error parsing SSE message" with the exception."""
    sdk = logging.getLogger("mcp.client.streamable_http")
    try:
        raise error
    except Exception:
        sdk.exception("Error parsing SSE message")


def test_an_answer_reaching_a_closed_session_logs_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A listen stream's answer that arrives after its watch's session closed is forwarded
    into a closed stream: not a parse failure, so no traceback (it ended `mcp-tasks call`'s
    stderr); a real parse failure still logs. (Importing `mcp_tasks.client` tames it.)"""
    caplog.set_level(logging.DEBUG)
    sse_forwarding_failed(anyio.BrokenResourceError())
    sse_forwarding_failed(anyio.ClosedResourceError())
    assert caplog.records == []
    sse_forwarding_failed(ValueError("not JSON"))
    [record] = caplog.records
    assert (record.levelname, record.getMessage()) == ("ERROR", "Error parsing SSE message")
