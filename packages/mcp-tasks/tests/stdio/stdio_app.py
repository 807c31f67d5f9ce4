"""A task server over stdio, for ``test_stdio.py``: ``python stdio_app.py STORE_URL [finish]``.

``progress_then_wait`` reports progress and then waits for an answer; ``forever`` runs until
cancelled; ``handover`` runs until its process ends, unless the process was started with
``finish``, where it completes at once naming that process.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer

from mcp_tasks import RunnerOptions, TaskContext, Tasks

NOTE_SCHEMA = {"type": "object", "properties": {"note": {"type": "string"}}}


def build(store_url: str, *, finish: bool) -> MCPServer[Any]:
    tasks = Tasks(store=store_url, runner=RunnerOptions(lease_ms=3_000))
    mcp: MCPServer[Any] = MCPServer(
        "stdio-tasks", extensions=[tasks.extension()], lifespan=tasks.lifespan
    )

    @tasks.tool(mcp, mode="required", poll_interval_ms=100)
    async def progress_then_wait(item: str, ctx: TaskContext) -> str:
        await ctx.progress(1, 2, f"prepared {item}")
        answer = await ctx.elicit("note", f"A note for {item}?", NOTE_SCHEMA)
        content = answer.get("content")
        note = content.get("note") if isinstance(content, dict) else None
        return f"{item}: {answer.get('action')} ({note})"

    @tasks.tool(mcp, mode="required", poll_interval_ms=100)
    async def forever(ctx: TaskContext) -> str:
        await ctx.progress(0, None, "running")
        await anyio.sleep_forever()
        return "unreachable"

    @tasks.tool(mcp, mode="required", poll_interval_ms=100)
    async def handover(ctx: TaskContext) -> str:
        await ctx.progress(0, None, f"started in {os.getpid()}")
        if not finish:
            await anyio.sleep_forever()
        return f"finished in {os.getpid()}"

    return mcp


if __name__ == "__main__":
    build(sys.argv[1], finish=sys.argv[2:] == ["finish"]).run(transport="stdio")
