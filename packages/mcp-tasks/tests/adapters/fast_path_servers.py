"""The server and the task start the fast-path tests share: two required-task tools (one that
asks for input, one that echoes) and a start that waits for a status through tasks/get."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.mcpserver import MCPServer

from mcp_tasks import TaskContext  # noqa: TC001 (tasks.tool reads the annotation at run time)

if TYPE_CHECKING:
    from mcp_tasks import Tasks
    from mcp_tasks.testing import RawClient


def build_server(tasks: Tasks, name: str = "fast-path", **options: Any) -> MCPServer[Any]:
    """An MCPServer with ``tasks`` installed (``options`` go to MCPServer) and the tools
    ``ask`` (elicits ``name``) and ``echo`` (returns ``text``)."""
    mcp: MCPServer[Any] = MCPServer(
        name, extensions=[tasks.extension()], lifespan=tasks.lifespan, **options
    )

    @tasks.tool(mcp, mode="required")
    async def ask(ctx: TaskContext) -> str:
        return json.dumps(await ctx.elicit("name", "Name?"))

    @tasks.tool(mcp, mode="required")
    async def echo(text: str) -> str:
        return text

    return mcp


async def start(client: RawClient, tool: str, arguments: dict[str, Any], status: str) -> str:
    """Call ``tool`` as a task and wait until tasks/get reports ``status``; its id."""
    created = await client.call("tools/call", {"name": tool, "arguments": arguments})
    task_id: str = created["result"]["taskId"]
    with anyio.fail_after(10):
        while True:
            got = await client.call("tasks/get", {"taskId": task_id})
            if got["result"]["status"] == status:
                return task_id
            await anyio.sleep(0.02)
