"""``tasks.install`` on a low-level ``Server``: advertise, serve tasks/*, wrap tools/call."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import httpx2 as httpx
import pytest
from mcp.server.lowlevel.server import Server
from mcp_types import CallToolRequestParams, CallToolResult, TextContent

from mcp_tasks import Tasks, current_task_context
from mcp_tasks.testing import RawClient, running_asgi

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

pytestmark = pytest.mark.anyio


def build(tasks: Tasks) -> Server[Any]:
    async def call_tool(
        ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult:
        context = current_task_context()
        if context is not None and context.task_id is not None:
            await context.progress(1, 1, "lowlevel")
        text = f"{params.name}:{(params.arguments or {}).get('x')}"
        return CallToolResult(content=[TextContent(type="text", text=text)])

    server: Server[Any] = Server("lowlevel", on_call_tool=call_tool, lifespan=tasks.lifespan)
    tasks.install(server)
    tasks.register("shout", mode="optional")
    return server


async def test_install_serves_the_extension_on_a_lowlevel_server() -> None:
    """discover advertises the extension; a declared call becomes a task that completes with
    the handler's result; an undeclared call and an unregistered tool stay synchronous."""
    tasks = Tasks()
    async with (
        running_asgi(build(tasks).streamable_http_app()) as url,
        httpx.AsyncClient(timeout=10) as http,
    ):
        client = RawClient(http, url)
        discover = (await client.call("server/discover"))["result"]
        assert discover["capabilities"]["extensions"] == {"io.modelcontextprotocol/tasks": {}}
        assert "tasks" not in discover["capabilities"]

        created = (await client.call("tools/call", {"name": "shout", "arguments": {"x": 1}}))[
            "result"
        ]
        assert created["resultType"] == "task"
        with anyio.fail_after(10):
            while True:
                got = (await client.call("tasks/get", {"taskId": created["taskId"]}))["result"]
                if got["status"] == "completed":
                    break
                await anyio.sleep(0.05)
        assert got["result"]["content"][0]["text"] == "shout:1"
        assert got["statusMessage"] == "lowlevel (1/1)"

        sync = await client.call(
            "tools/call", {"name": "shout", "arguments": {"x": 2}}, capabilities={}
        )
        other = await client.call("tools/call", {"name": "plain", "arguments": {"x": 3}})
        assert sync["result"]["content"][0]["text"] == "shout:2"
        assert other["result"]["content"][0]["text"] == "plain:3"
        assert "taskId" not in sync["result"]
        assert "taskId" not in other["result"]


async def test_a_lowlevel_server_without_a_listen_handler_still_serves_task_ids() -> None:
    """No ``on_subscriptions_listen``: a listen naming taskIds is served by the middleware
    alone (ack with the task, its state, the end); one without taskIds stays -32601."""
    tasks = Tasks()
    async with (
        running_asgi(build(tasks).streamable_http_app()) as url,
        httpx.AsyncClient(timeout=10) as http,
    ):
        client = RawClient(http, url)
        task_id = (await client.call("tools/call", {"name": "shout", "arguments": {"x": 1}}))[
            "result"
        ]["taskId"]
        listen = {"notifications": {"taskIds": [task_id]}}
        async with client.stream("subscriptions/listen", listen, request_id="l") as stream:
            messages = []
            while (message := await stream.next()) is not None:
                messages.append(message)
        assert messages[0]["params"]["notifications"] == {"taskIds": [task_id]}
        assert messages[-2]["params"]["status"] == "completed"
        assert messages[-1]["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "l"
        plain = {"notifications": {"toolsListChanged": True}}
        assert (await client.call("subscriptions/listen", plain))["error"]["code"] == -32601
