"""The app ``test_operator_blip`` serves with ``mcp-tasks serve blip_app:mcp --store URL``: its
``Tasks()`` has no store of its own, so it runs on the one ``--store`` names. Each start of a
body is logged to ``CRASH_LOG`` (a ``run`` line, as ``crash_app`` logs them)."""

from __future__ import annotations

from typing import Any

import anyio
from commit_log import log
from mcp.server.mcpserver import MCPServer

from mcp_tasks import TaskContext, Tasks

#: A progress report every TICK_S, TICKS of them: about 8 s of work.
TICK_S = 0.5
TICKS = 16

tasks = Tasks()
mcp: MCPServer[Any] = MCPServer("blip", extensions=[tasks.extension()], lifespan=tasks.lifespan)


async def tick(ctx: TaskContext, steps: range) -> None:
    for step in steps:
        await ctx.progress(step, TICKS, "ticking")
        await anyio.sleep(TICK_S)


@tasks.tool(mcp, mode="required", poll_interval_ms=100)
async def ticker(ctx: TaskContext) -> str:
    """Report progress every 0.5 s for about 8 s."""
    assert ctx.idempotency_key is not None
    log("run", ctx.idempotency_key, f"attempt={ctx.attempt}")
    await tick(ctx, range(TICKS))
    return "ticked"


@tasks.tool(mcp, mode="required", poll_interval_ms=100)
async def asker(ctx: TaskContext) -> str:
    """Report progress for 2 s, ask whether to go on, then report progress for 6 s more."""
    assert ctx.idempotency_key is not None
    log("run", ctx.idempotency_key, f"attempt={ctx.attempt}")
    await tick(ctx, range(4))
    answer: dict[str, Any] = await ctx.elicit(
        "go",
        "Go on?",
        {"type": "object", "properties": {"go": {"type": "boolean"}}, "required": ["go"]},
    )
    await tick(ctx, range(4, TICKS))
    return f"ticked after {answer['action']}: {answer.get('content')}"
