"""`Tasks.register` and `Tasks.tool` take the fields of `ToolOptions` as keywords."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks import Tasks, ToolOptions

pytestmark = pytest.mark.anyio


def needs_nothing(arguments: Any, answers: Any) -> None:
    return None


def test_register_takes_every_tool_option_and_nothing_else() -> None:
    """Each field of ToolOptions is a keyword of register; a keyword that is none is a
    TypeError, and nothing is registered."""
    tasks = Tasks()
    options = tasks.register(
        "build",
        mode="forbidden",
        ttl_ms=None,
        poll_interval_ms=7,
        preflight=needs_nothing,
        manual=True,
        retry_delays_ms=(1, 2),
    )
    assert options == ToolOptions(
        mode="forbidden",
        ttl_ms=None,
        poll_interval_ms=7,
        preflight=needs_nothing,
        manual=True,
        retry_delays_ms=(1, 2),
    )
    assert tasks.engine.tools["build"] is options
    with pytest.raises(TypeError, match="mdoe"):
        tasks.register("deploy", mdoe="required")
    assert "deploy" not in tasks.engine.tools


async def test_tool_gives_task_options_to_tasks_and_the_rest_to_the_server() -> None:
    """tasks.tool's keywords that are task options become the tool's ToolOptions; the
    others (description, title) are the SDK tool's own."""
    tasks = Tasks()
    mcp: MCPServer[Any] = MCPServer("options", extensions=[tasks.extension()])

    @tasks.tool(mcp, mode="required", poll_interval_ms=500, description="Builds", title="Build")
    async def build(ref: str) -> str:
        return ref

    assert tasks.engine.tools["build"] == ToolOptions(mode="required", poll_interval_ms=500)
    (listed,) = [tool for tool in await mcp.list_tools() if tool.name == "build"]
    assert (listed.description, listed.title) == ("Builds", "Build")
    assert tasks.runner.executors["build"] is not None  # it can run again after a crash
