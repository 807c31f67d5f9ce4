"""Finding the Tasks an app serves from the app alone (how ``mcp-tasks serve`` finds them)."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from fastmcp import FastMCP
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.routing import Mount

from mcp_tasks import Tasks
from mcp_tasks.tasks import tasks_served_by


async def _call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[])


def test_an_mcpserver_leads_to_the_tasks_serving_its_notifications() -> None:
    """``tasks.serve_notifications(mcp)`` puts the Tasks on the server's public middleware
    chain: that Tasks is found, and not one built beside it that the server does not serve.
    The extension alone leaves nothing public (an MCPServer keeps its extensions to
    itself)."""
    tasks, other = Tasks(), Tasks()
    mcp = MCPServer("ext", extensions=[tasks.extension()])
    assert tasks_served_by(mcp) == []
    tasks.serve_notifications(mcp)
    assert tasks_served_by(mcp) == [tasks]
    assert other not in tasks_served_by(mcp)


def test_an_mcpserver_whose_lifespan_is_the_tasks_lifespan_leads_to_it() -> None:
    tasks = Tasks()
    mcp = MCPServer("life", extensions=[tasks.extension()], lifespan=tasks.lifespan)
    assert tasks_served_by(mcp) == [tasks]


def test_an_mcpserver_with_extension_tools_and_lifespan_yields_its_tasks_once() -> None:
    """The extension, a ``tasks.tool`` and ``lifespan=tasks.lifespan`` all lead to one Tasks."""
    tasks = Tasks()
    mcp = MCPServer("all", extensions=[tasks.extension()], lifespan=tasks.lifespan)

    @tasks.tool(mcp, mode="optional")
    async def echo(text: str) -> str:
        return text

    assert tasks_served_by(mcp) == [tasks]


def test_a_lowlevel_server_leads_to_the_tasks_installed_on_it() -> None:
    """``tasks.install(server)`` on a low-level Server, without the Tasks lifespan."""
    tasks = Tasks()
    server = Server("low", on_call_tool=_call_tool)
    tasks.install(server)
    assert tasks_served_by(server) == [tasks]


def test_a_fastmcp_server_leads_to_the_tasks_of_its_extension() -> None:
    tasks = Tasks()
    mcp = FastMCP("fast")
    mcp.add_extension(tasks.fastmcp_extension())
    assert tasks_served_by(mcp) == [tasks]
    assert tasks_served_by(FastMCP("bare")) == []


def test_the_http_app_leads_to_its_tasks() -> None:
    """``tasks.http_app(server)`` (a TasksFastPath) names its Tasks."""
    tasks = Tasks()
    mcp = MCPServer("http")
    assert tasks_served_by(tasks.http_app(mcp)) == [tasks]


def test_a_starlette_app_leads_to_the_tasks_behind_its_routes_and_its_lifespan() -> None:
    """The SDK's app mounted in a Starlette app: the Tasks serving its server's tools; a
    Starlette app whose lifespan is ``tasks.lifespan``: that Tasks."""
    mounted = Tasks()
    mcp = MCPServer("mounted", extensions=[mounted.extension()])

    @mounted.tool(mcp, mode="optional")
    async def echo(text: str) -> str:
        return text

    app = Starlette(routes=[Mount("/", app=mcp.streamable_http_app())])
    assert tasks_served_by(app) == [mounted]
    running = Tasks()
    assert tasks_served_by(Starlette(lifespan=running.lifespan)) == [running]


def test_a_tasks_is_its_own_and_anything_else_has_none() -> None:
    tasks = Tasks()
    assert tasks_served_by(tasks) == [tasks]
    assert tasks_served_by(MCPServer("bare")) == []
    assert tasks_served_by(object()) == []
