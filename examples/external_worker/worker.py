"""Manual mode, worker side: a procrastinate job drives the task by id via `TaskControl`.

procrastinate (https://procrastinate.readthedocs.io) is the job system: its jobs live in
Postgres and its own worker process runs them. The server (`server.py`) defers a `render`
job carrying the task id and the tool's arguments; this module is the procrastinate app
both sides load, and the job itself. Run the worker with procrastinate's CLI:

    export PYTHONPATH=examples/external_worker JOBS_POSTGRES_URL=postgresql://localhost/render
    uv run procrastinate --app=worker.app worker

For each job it reports progress, stops if the client cancelled, asks the client whether to
publish (the task waits in input_required) and completes with the result. It opens the
mcp-tasks store of `MCP_TASKS_STORE_URL`, the one the server writes.

`JOBS_POSTGRES_URL` is a libpq URL; `JOBS_SCHEMA`, if set, is the schema procrastinate's
tables are in (its search_path). The task id is a bearer capability: procrastinate keeps
job arguments in its `procrastinate_jobs` table (and events), so those tables must be as
private as the task store. procrastinate's log lines print a job's arguments; the id is
passed as a `HiddenTaskId`, which prints as `<task id>` (a JSON log formatter that dumps the
records' `job` extras would still show it).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import anyio
import procrastinate

from mcp_tasks import TaskControl, store_from_url

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


class HiddenTaskId(str):
    """A task id that keeps out of log lines: procrastinate logs jobs with their arguments'
    repr. It is stored (and compared, and sent) as the plain string."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<task id>"


def _hide_task_ids(obj: dict[str, Any]) -> dict[str, Any]:
    if isinstance(obj.get("task_id"), str):
        obj["task_id"] = HiddenTaskId(obj["task_id"])
    return obj


def load_json(text: str | bytes) -> Any:
    """procrastinate's JSON decoder here: job arguments come back with the id hidden."""
    return json.loads(text, object_hook=_hide_task_ids)


def connector() -> procrastinate.PsycopgConnector:
    schema = os.environ.get("JOBS_SCHEMA")
    options = {"options": f"-csearch_path={schema}"} if schema else {}
    return procrastinate.PsycopgConnector(
        conninfo=os.environ.get("JOBS_POSTGRES_URL", ""), kwargs=options, json_loads=load_json
    )


app = procrastinate.App(connector=connector())


async def answer_of(control: TaskControl, task_id: str, key: str) -> Any:
    """Wait for the client's answer to `key`; None if the task ended (e.g. cancelled)."""
    while True:
        record = await control.status(task_id)
        if key in record.input_responses:
            return record.input_responses[key]
        if record.status.is_terminal:
            return None
        await anyio.sleep(IDLE_SECONDS)


async def drive(control: TaskControl, task_id: str, scene: str, frames: int) -> None:
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


@app.task(name="render")
async def render(task_id: str, scene: str, frames: int) -> None:
    """The job: render `scene`, driving task `task_id` on the shared store."""
    store = store_from_url(os.environ.get("MCP_TASKS_STORE_URL"))
    # Each write is published on the store's own notifier (Postgres NOTIFY here), so the
    # server's listeners hear it at once; leaving the block frees that connection.
    try:
        async with TaskControl(store) as control:
            try:
                await drive(control, task_id, scene, int(frames))
            except Exception as error:
                # Fail the task (the client sees why), then let procrastinate record it.
                if not (await control.status(task_id)).status.is_terminal:
                    await control.fail(task_id, f"render failed: {type(error).__name__}")
                raise
    finally:
        await store.close()
