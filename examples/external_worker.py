"""Manual mode: the MCP server hands tasks to a worker in another process.

The server's ``render`` tool returns ``tasks.defer(start=enqueue)``: the task is created in the
shared Store and its id is dropped into a spool directory (standing in for Celery, arq, a GPU
queue). The worker, a separate process, takes ids from the spool and drives each task by id
alone through ``TaskControl(store)``: progress, a question for the client, the result.

    uv run python examples/external_worker.py serve --store sqlite:///worker.db --spool /tmp/spool
    uv run python examples/external_worker.py work  --store sqlite:///worker.db --spool /tmp/spool

The Store must be one both processes reach (SQLite file, Postgres, Redis, MongoDB); the
memory store lives in one process only.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer

from mcp_tasks import Deferred, TaskControl, Tasks, TaskStatus, store_from_url

logger = logging.getLogger("external_worker")


def build(tasks: Tasks, spool: Path) -> MCPServer[Any]:
    """The server: one manual-mode tool that enqueues its work."""
    mcp: MCPServer[Any] = MCPServer(
        "external-worker", extensions=[tasks.extension()], lifespan=tasks.lifespan
    )

    @tasks.tool(mcp, mode="required", manual=True)
    def render(scene: str, frames: int = 3) -> Deferred:
        """Render a scene on the worker fleet."""

        def enqueue(task_id: str) -> None:
            job = spool / f"{task_id}.json"
            job.with_suffix(".tmp").write_text(json.dumps({"scene": scene, "frames": frames}))
            job.with_suffix(".tmp").rename(job)  # atomic: the worker never sees half a job

        return tasks.defer(start=enqueue, ttl_ms=3_600_000, status_message="Queued")

    return mcp


async def work_one(control: TaskControl, task_id: str, job: dict[str, Any]) -> None:
    """Drive one task by its id: progress, a confirmation round, then the result."""
    frames = int(job["frames"])
    for frame in range(1, frames + 1):
        if await control.is_cancelled(task_id):
            return
        await control.progress(task_id, f"Rendering frame {frame}/{frames}")
        await anyio.sleep(0.1)
    ask = {
        "publish": {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": f"Publish {job['scene']}?",
                "requestedSchema": {
                    "type": "object",
                    "properties": {"publish": {"type": "boolean"}},
                },
            },
        }
    }
    await control.require_input(task_id, ask)
    while True:
        record = await control.status(task_id)
        if record.status is TaskStatus.CANCELLED:
            return
        if "publish" in record.input_responses:
            break
        await anyio.sleep(0.1)
    answer = record.input_responses["publish"]
    published = isinstance(answer, dict) and answer.get("action") == "accept"
    verdict = "published" if published else "kept private"
    await control.complete(task_id, f"Rendered {job['scene']} ({frames} frames), {verdict}")


async def work(store_url: str, spool: Path) -> None:
    """The worker loop: take jobs from the spool and run them concurrently."""
    control = TaskControl(store_from_url(store_url))
    queue = anyio.Path(spool)
    async with anyio.create_task_group() as tg:
        while True:
            async for job in queue.glob("*.json"):
                claimed = job.with_suffix(".running")
                try:
                    await job.rename(claimed)  # one worker per job
                except FileNotFoundError:
                    continue
                body = json.loads(await claimed.read_text())
                tg.start_soon(work_one, control, claimed.stem, body)
            await anyio.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description="Manual-mode tasks with an external worker.")
    parser.add_argument("role", choices=["serve", "work"])
    parser.add_argument("--store", default="sqlite:///external-worker.db")
    parser.add_argument("--spool", type=Path, default=Path("external-worker-spool"))
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    args.spool.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO)
    if args.role == "serve":
        tasks = Tasks(store=store_from_url(args.store))
        app = build(tasks, args.spool).streamable_http_app()
        uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
    else:
        anyio.run(work, args.store, args.spool)


if __name__ == "__main__":
    main()
