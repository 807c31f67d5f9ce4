"""Manual mode, server side: `render` creates a task and defers a procrastinate job for it.

Both processes share the mcp-tasks store and procrastinate's job tables (Postgres):

    export MCP_TASKS_STORE_URL='postgresql://localhost/render?schema=render_tasks'
    export JOBS_POSTGRES_URL=postgresql://localhost/render JOBS_SCHEMA=render_jobs
    export PYTHONPATH=examples/external_worker
    psql "$JOBS_POSTGRES_URL" -c 'CREATE SCHEMA render_jobs'   # once
    uv run procrastinate --app=worker.app schema --apply          # once
    uv run python examples/external_worker/server.py     # http://127.0.0.1:8000/mcp
    uv run procrastinate --app=worker.app worker         # another terminal, or another host
    uv run mcp-tasks call http://127.0.0.1:8000/mcp render scene=teapot frames=3

`tasks.defer(start=…)` makes the task; `start` defers a job carrying only the task id and
the tool's arguments, and the worker drives the task by id alone (see `worker.py`). The id
is a bearer capability and procrastinate stores job arguments in its tables: keep them as
private as the task store.
"""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer
from worker import HiddenTaskId, app
from worker import render as render_job

from mcp_tasks import Deferred, Tasks, store_from_url

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

tasks = Tasks(store=store_from_url(os.environ.get("MCP_TASKS_STORE_URL")))


@asynccontextmanager
async def lifespan(server: MCPServer[Any]) -> AsyncIterator[dict[str, Any]]:
    """The task runner, and procrastinate's connection pool for deferring jobs."""
    async with app.open_async(), tasks.lifespan(server) as state:
        yield state


mcp: MCPServer[Any] = MCPServer("renderer", extensions=[tasks.extension()], lifespan=lifespan)


@tasks.tool(mcp, mode="required", manual=True, poll_interval_ms=200)
async def render(scene: str, frames: int = 3) -> Deferred:
    """Render a scene on the render farm (always a task; a worker process does the work)."""

    async def enqueue(task_id: str) -> None:
        await render_job.defer_async(task_id=HiddenTaskId(task_id), scene=scene, frames=frames)

    return tasks.defer(start=enqueue, status_message="queued for the render farm")


if __name__ == "__main__":
    mcp.run(transport="streamable-http")
