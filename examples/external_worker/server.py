"""Manual mode, server side: `render` creates a task and hands it to a separate worker.

    export MCP_TASKS_STORE_URL=sqlite:///render-tasks.db JOBS_DIR=./render-jobs
    uv run python examples/external_worker/server.py     # http://127.0.0.1:8000/mcp
    uv run python examples/external_worker/worker.py     # another terminal, or another host
    uv run mcp-tasks call http://127.0.0.1:8000/mcp render scene=teapot frames=3

The server and the worker share only the Store (SQLite here; Postgres across hosts) and
the job queue. `tasks.defer(start=…)` makes the task; the worker drives it by id alone.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from jobqueue import JobQueue
from mcp.server.mcpserver import MCPServer

from mcp_tasks import Deferred, Tasks, store_from_url

tasks = Tasks(store=store_from_url(os.environ.get("MCP_TASKS_STORE_URL")))
queue = JobQueue(Path(os.environ.get("JOBS_DIR", "render-jobs")))
mcp: MCPServer[Any] = MCPServer("renderer", extensions=[tasks.extension()], lifespan=tasks.lifespan)


@tasks.tool(mcp, mode="required", manual=True, poll_interval_ms=200)
async def render(scene: str, frames: int = 3) -> Deferred:
    """Render a scene on the render farm (always a task; a worker process does the work)."""

    def enqueue(task_id: str) -> None:
        queue.put({"task_id": task_id, "scene": scene, "frames": frames})

    return tasks.defer(start=enqueue, status_message="queued for the render farm")


if __name__ == "__main__":
    mcp.run(transport="streamable-http")
