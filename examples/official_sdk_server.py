"""An official-SDK `MCPServer` whose tools run as durable tasks.

    uv run python examples/official_sdk_server.py               # http://127.0.0.1:8000/mcp
    cd examples && uv run mcp-tasks serve official_sdk_server:mcp --store sqlite:///tasks.db
    uv run mcp-tasks call http://127.0.0.1:8000/mcp build ref=main

The app leaves the store to whoever runs it (`Tasks()` pins none): `mcp-tasks serve --store URL`
hands it one; run directly, it uses $MCP_TASKS_STORE_URL, else a private memory store.
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer

from mcp_tasks import ServingOptions, TaskContext, Tasks

tasks = Tasks(serving=ServingOptions(default_ttl_ms=3_600_000))
mcp: MCPServer[Any] = MCPServer("builder", extensions=[tasks.extension()], lifespan=tasks.lifespan)

CONFIRM = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}


@tasks.tool(mcp, mode="optional", poll_interval_ms=500)
async def build(ref: str, ctx: TaskContext) -> str:
    """Build a git ref: a task for clients that support tasks, inline for the others."""
    for step, message in enumerate(("Fetching", "Compiling", "Testing"), start=1):
        await ctx.progress(step, 3, message)
        await anyio.sleep(0.2)
    return f"built {ref}"


@tasks.tool(mcp, mode="required", poll_interval_ms=500)
async def release(version: str, ctx: TaskContext) -> str:
    """Publish a release after the user confirms (the task waits in input_required)."""
    answer = await ctx.elicit("confirm", f"Publish {version}?", CONFIRM)
    content = answer.get("content")
    if answer.get("action") != "accept" or not isinstance(content, dict) or not content["confirm"]:
        return f"{version} not published"
    return f"published {version}"


if __name__ == "__main__":
    mcp.run(transport="streamable-http")
