"""A FastMCP server whose `task=True` tools run on an mcp-tasks Store instead of Docket.

    uv run python examples/fastmcp_server.py                   # http://127.0.0.1:8000/mcp
    uv run mcp-tasks call http://127.0.0.1:8000/mcp slow_sum 'numbers=[1, 2, 3]'

Needs the `fastmcp` extra (`pip install "mcp-tasks[fastmcp]"`). The store comes from
$MCP_TASKS_STORE_URL, else a private memory store (`Tasks()` pins none, so
`mcp-tasks serve --store URL` can hand it one).
"""

from __future__ import annotations

from datetime import timedelta

import anyio
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.utilities.tasks import TaskConfig

from mcp_tasks import Tasks, current_task_context

tasks = Tasks()
mcp = FastMCP("fastmcp-with-mcp-tasks")
mcp.add_extension(tasks.fastmcp_extension())


@mcp.tool(task=True)
async def slow_sum(numbers: list[float]) -> float:
    """Add numbers one by one (a task for clients that support tasks, inline otherwise)."""
    total = 0.0
    task = current_task_context()  # mcp-tasks' context: progress lands on the task
    for index, number in enumerate(numbers, start=1):
        total += number
        if task is not None:
            await task.progress(index, len(numbers), f"added {index} of {len(numbers)}")
        await anyio.sleep(0.1)
    return total


@mcp.tool(task=TaskConfig(mode="required", poll_interval=timedelta(milliseconds=200)))
async def audit(path: str) -> str:
    """Always a task; a missing path is the tool's own error (completed with isError)."""
    await anyio.sleep(0.2)
    if not path.startswith("/"):
        raise ToolError(f"{path!r} is not an absolute path")
    return f"{path}: no findings"


if __name__ == "__main__":
    mcp.run(transport="http", host="127.0.0.1", port=8000)
