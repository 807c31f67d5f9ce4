"""Manual mode, server side: `render` creates a task and sends a Celery job for it.

The server and Celery's workers share the mcp-tasks store (Postgres here: any durable
store every process reaches) and RabbitMQ, Celery's broker:

    export MCP_TASKS_STORE_URL='postgresql://localhost/render?schema=render_tasks'
    export CELERY_BROKER_URL='amqp://guest:guest@127.0.0.1:5672//'
    export PYTHONPATH=examples/celery_worker
    uv run python examples/celery_worker/server.py     # http://127.0.0.1:8000/mcp
    uv run celery --app=render_jobs worker --loglevel=INFO   # another terminal, or host
    uv run mcp-tasks call http://127.0.0.1:8000/mcp render scene=teapot frames=3

`tasks.defer(start=…)` makes the task; `start` sends a job carrying only the task id and
the tool's arguments, and the worker drives the task by id alone (see `render_jobs.py`).
"""

from __future__ import annotations

import os
from functools import partial
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from render_jobs import render as render_job

from mcp_tasks import Deferred, Tasks, store_from_url

tasks = Tasks(store=store_from_url(os.environ.get("MCP_TASKS_STORE_URL")))
mcp: MCPServer[Any] = MCPServer("renderer", extensions=[tasks.extension()], lifespan=tasks.lifespan)


@tasks.tool(mcp, mode="required", manual=True, poll_interval_ms=200)
async def render(scene: str, frames: int = 3) -> Deferred:
    """Render a scene on the render farm (always a task; a Celery worker does the work)."""

    async def enqueue(task_id: str) -> None:
        arguments = {"task_id": task_id, "scene": scene, "frames": frames}
        # The id is a bearer capability: Celery's log lines and events show this instead.
        shown = repr({**arguments, "task_id": "<task id>"})
        send = partial(render_job.apply_async, kwargs=arguments, kwargsrepr=shown)
        await anyio.to_thread.run_sync(send)  # Celery's client blocks: not on the loop

    return tasks.defer(start=enqueue, status_message="queued for the render farm")


if __name__ == "__main__":
    mcp.run(transport="streamable-http")
