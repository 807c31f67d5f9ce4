"""Manual mode, worker side: a separate process that drives tasks by id via `TaskControl`.

    MCP_TASKS_STORE_URL=sqlite:///render-tasks.db JOBS_DIR=./render-jobs \\
        uv run python examples/external_worker/worker.py [--max-jobs N]

For each job it reports progress, stops if the client cancelled, asks the client whether
to publish (the task waits in input_required) and completes with the result.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from jobqueue import JobQueue

from mcp_tasks import TaskControl, TaskStatus, store_from_url

if TYPE_CHECKING:
    from mcp_tasks.domain.jsonsafe import JSONObject

PUBLISH_QUESTION: JSONObject = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Publish the render?",
        "requestedSchema": {
            "type": "object",
            "properties": {"publish": {"type": "boolean"}},
            "required": ["publish"],
        },
    },
}
FRAME_SECONDS = 0.1
IDLE_SECONDS = 0.1


async def answer_of(control: TaskControl, task_id: str, key: str) -> Any:
    """Wait for the client's answer to `key`; None if the task ended (e.g. cancelled)."""
    while True:
        record = await control.status(task_id)
        if key in record.input_responses:
            return record.input_responses[key]
        if record.status.is_terminal:
            return None
        await anyio.sleep(IDLE_SECONDS)


async def render(control: TaskControl, job: dict[str, Any]) -> None:
    task_id, scene, frames = job["task_id"], job["scene"], int(job["frames"])
    for frame in range(1, frames + 1):
        if await control.is_cancelled(task_id):
            return  # the client cancelled: the task is already `cancelled`
        await control.progress(task_id, f"rendered frame {frame}/{frames}")
        await anyio.sleep(FRAME_SECONDS)
    await control.require_input(task_id, {"publish": PUBLISH_QUESTION})
    answer = await answer_of(control, task_id, "publish")
    if answer is None:
        return
    content = answer.get("content") if isinstance(answer, dict) else None
    published = isinstance(content, dict) and content.get("publish") is True
    await control.complete(
        task_id, f"rendered {scene} ({frames} frames){', published' if published else ''}"
    )


async def main(store_url: str | None, jobs: Path, max_jobs: int | None) -> None:
    store = store_from_url(store_url)
    control = TaskControl(store)
    queue = JobQueue(jobs)
    done = 0
    try:
        while max_jobs is None or done < max_jobs:
            job = queue.take()
            if job is None:
                await anyio.sleep(IDLE_SECONDS)
                continue
            try:
                await render(control, job)
            except Exception as error:  # one bad job must not stop the worker
                record = await control.status(job["task_id"])
                if record.status is not TaskStatus.CANCELLED and not record.status.is_terminal:
                    await control.fail(job["task_id"], f"render failed: {type(error).__name__}")
            done += 1
    finally:
        await store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="The render worker of the manual-mode example.")
    parser.add_argument("--store", default=os.environ.get("MCP_TASKS_STORE_URL"))
    default_jobs = Path(os.environ.get("JOBS_DIR", "render-jobs"))
    parser.add_argument("--jobs", type=Path, default=default_jobs)
    parser.add_argument("--max-jobs", type=int, default=None, help="exit after this many jobs")
    args = parser.parse_args()
    anyio.run(main, args.store, args.jobs, args.max_jobs)
