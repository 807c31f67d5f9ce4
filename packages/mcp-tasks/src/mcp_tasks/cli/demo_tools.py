"""The built-in demo tools: a build with progress, a deploy asking to confirm, a sleep to cancel."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from mcp_tasks.runtime.context import TaskContext  # noqa: TC001 (tool hints resolve at runtime)
from mcp_tasks.tasks import Tasks

if TYPE_CHECKING:
    from mcp_tasks.stores.protocol import Store

BUILD_STEPS = ("Fetching sources", "Compiling", "Running tests", "Packaging")
CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "title": "Go ahead?"}},
    "required": ["confirm"],
}
# Short enough that the demo feels live, long enough that each step is seen.
STEP_SECONDS = 0.4
POLL_INTERVAL_MS = 200


def demo_server(
    store: Store | str,
    *,
    step_seconds: float = STEP_SECONDS,
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO",
) -> MCPServer:
    """An MCPServer with Tasks on `store` (a Store or URL) and the three demo tools; it owns
    `store` and closes it at shutdown."""
    tasks = Tasks(store=store, close_store=True)
    mcp = MCPServer(
        "mcp-tasks-demo",
        extensions=[tasks.extension()],
        lifespan=tasks.lifespan,
        log_level=log_level,
    )

    @tasks.tool(mcp, mode="optional", poll_interval_ms=POLL_INTERVAL_MS)
    async def build(ctx: TaskContext, ref: str = "main") -> str:
        """Build a git ref, reporting each step as progress."""
        for number, step in enumerate(BUILD_STEPS, start=1):
            await ctx.progress(number, len(BUILD_STEPS), step)  # shown as "step (n/4)"
            await anyio.sleep(step_seconds)
        return f"built {ref}: 4 steps, all green"

    @tasks.tool(mcp, mode="required", poll_interval_ms=POLL_INTERVAL_MS)
    async def deploy(ctx: TaskContext, env: str = "staging") -> str:
        """Deploy after the client confirms (the task waits in input_required)."""
        await ctx.progress(1, 2, f"Preparing {env}")
        await anyio.sleep(step_seconds)
        answer = await ctx.elicit("confirm", f"Deploy to {env}?", CONFIRM_SCHEMA)
        content = answer.get("content")
        if (
            answer.get("action") != "accept"
            or not isinstance(content, dict)
            or not content.get("confirm")
        ):
            raise ToolError(f"deploy to {env} was not confirmed")
        await ctx.progress(2, 2, f"Deploying to {env}")
        await anyio.sleep(step_seconds)
        return f"deployed to {env}"

    @tasks.tool(mcp, mode="required", poll_interval_ms=POLL_INTERVAL_MS)
    async def sleep(ctx: TaskContext, seconds: float = 600) -> str:
        """Sleep for a long time: something to cancel."""
        await ctx.progress(0, seconds, f"Sleeping {seconds:g}s")
        await anyio.sleep(seconds)
        return f"slept {seconds:g}s"

    return mcp
