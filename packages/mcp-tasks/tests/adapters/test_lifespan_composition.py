"""``tasks.running()`` composes into a Starlette/FastAPI lifespan when the server is mounted."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import httpx2 as httpx
import pytest
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.routing import Mount

from mcp_tasks import TaskContext, Tasks
from mcp_tasks.testing import RawClient, running_asgi

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

pytestmark = pytest.mark.anyio


async def test_mounted_server_runs_tasks_with_a_composed_lifespan() -> None:
    """A Starlette app mounting the MCP app (whose own lifespan never runs when mounted)
    composes the session manager and ``tasks.running()`` into its lifespan; tasks then run."""
    tasks = Tasks()
    mcp: MCPServer[Any] = MCPServer("mounted", extensions=[tasks.extension()])

    @tasks.tool(mcp, mode="optional")
    async def double(n: int, ctx: TaskContext) -> int:
        return n * 2

    inner = mcp.streamable_http_app()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with tasks.running(), mcp.session_manager.run():
            yield

    app = Starlette(routes=[Mount("/api", app=inner)], lifespan=lifespan)
    async with running_asgi(app) as url, httpx.AsyncClient(timeout=10) as http:
        client = RawClient(http, url.replace("/mcp", "/api/mcp"))
        created = (await client.call("tools/call", {"name": "double", "arguments": {"n": 21}}))[
            "result"
        ]
        with anyio.fail_after(10):
            while True:
                got = (await client.call("tasks/get", {"taskId": created["taskId"]}))["result"]
                if got["status"] == "completed":
                    break
                await anyio.sleep(0.05)
    assert got["result"]["structuredContent"] == {"result": 42}
