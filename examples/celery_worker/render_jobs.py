"""Manual mode on Celery: a Celery task drives the MCP task by id via `TaskControl`.

Celery (https://docs.celeryq.dev) is the job system: its messages live in RabbitMQ and its
own worker processes run them. The server (`server.py`) sends a `render` job carrying the
task id and the tool's arguments; this module is the Celery app both sides load, and the
job itself. Run a worker with Celery's CLI:

    export PYTHONPATH=examples/celery_worker
    export MCP_TASKS_STORE_URL='postgresql://localhost/render?schema=render_tasks'
    uv run celery --app=render_jobs worker --loglevel=INFO

For each job it reports progress, stops if the client cancelled, asks the client whether to
publish (the task waits in input_required) and completes with the result. It opens the
mcp-tasks store of `MCP_TASKS_STORE_URL`, the one the server writes. `CELERY_BROKER_URL`
names RabbitMQ (default `amqp://guest:guest@127.0.0.1:5672//`), `RENDER_QUEUE` the queue
(default `render`).

A killed worker's job runs again: the message is acknowledged only when the job ends
(`task_acks_late`), so RabbitMQ gives it to another worker when the dying worker's
connection closes, and a job whose pool process died is put back by the worker itself
(`task_reject_on_worker_lost`). The second run repeats the first one's steps; each write
to the task carries an event id naming its step, so the store answers a repeated one
`duplicate` and writes nothing: the client sees each frame, the question and the result
once.

The task id is a bearer capability: RabbitMQ holds the job's arguments until the job is
acknowledged, so the broker must be as private as the task store. The server sends the
job with a `kwargsrepr` that leaves the id out of Celery's log lines and monitoring events.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import anyio
from celery import Celery
from celery.utils.log import get_task_logger

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

app = Celery(
    "renders", broker=os.environ.get("CELERY_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//")
)
app.conf.update(
    task_default_queue=os.environ.get("RENDER_QUEUE", "render"),
    # Acknowledge a job when it ends, not when it starts: a worker that dies mid-job never
    # acknowledged it, and RabbitMQ delivers it again when that worker's connection closes.
    task_acks_late=True,
    # Even with late acks, Celery acknowledges a job whose pool process was killed (SIGKILL,
    # the OOM killer); this puts it back on the queue instead. A job that kills its worker
    # every time then loops: a body that can crash its process needs a limit of its own.
    task_reject_on_worker_lost=True,
    # A worker reserves only the job it runs: a job waiting behind a long one on a worker
    # that then dies is not held back until that worker's connection closes.
    worker_prefetch_multiplier=1,
    # A worker cut off from RabbitMQ stops its unacknowledged jobs, which RabbitMQ already
    # gave to another worker: two live runs of one job would race each other's writes.
    worker_cancel_long_running_tasks_on_connection_loss=True,
    # The result goes to the MCP task; Celery keeps none.
    task_ignore_result=True,
    broker_connection_retry_on_startup=True,
)
log = get_task_logger(__name__)


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
    """Render, ask, complete. Each write names its step (`event_id`): run again after a
    crash, the job repeats its steps and the store applies only those not written yet."""
    if (await control.status(task_id)).status.is_terminal:
        log.info("render: the task has ended, nothing to do")  # e.g. delivered again after it
        return
    for frame in range(1, frames + 1):
        if await control.is_cancelled(task_id):
            log.info("render: cancelled by the client")
            return
        await anyio.sleep(FRAME_SECONDS)  # the frame's work (pure here: redone on a rerun)
        message = f"rendered frame {frame}/{frames}"
        written = await control.progress(task_id, message, event_id=f"frame-{frame}")
        log.info("render: frame %d/%d %s", frame, frames, written.outcome)
    asked = await control.require_input(
        task_id, {"publish": PUBLISH_QUESTION}, event_id="ask-publish"
    )
    log.info("render: question %s", asked.outcome)
    answer = await answer_of(control, task_id, "publish")
    if answer is None:
        log.info("render: the task ended while it waited for the answer")
        return
    content = answer.get("content") if isinstance(answer, dict) else None
    published = isinstance(content, dict) and content.get("publish") is True
    result = f"rendered {scene} ({frames} frames){', published' if published else ''}"
    done = await control.complete(task_id, result, event_id="result")
    log.info("render: result %s", done.outcome)


async def run(task_id: str, scene: str, frames: int) -> None:
    store = store_from_url(os.environ.get("MCP_TASKS_STORE_URL"))
    # Each write is published on the store's own notifier (Postgres NOTIFY here), so the
    # server's listeners hear it at once; leaving the block frees that connection.
    try:
        async with TaskControl(store) as control:
            try:
                await drive(control, task_id, scene, frames)
            except Exception as error:
                # Fail the task (the client sees why), then let Celery record the error.
                if not (await control.status(task_id)).status.is_terminal:
                    await control.fail(task_id, f"render failed: {type(error).__name__}")
                raise
    finally:
        await store.close()


@app.task(name="render")
def render(task_id: str, scene: str, frames: int) -> None:
    """The job: render `scene`, driving task `task_id` on the shared store."""
    again = " (delivered again)" if render.request.delivery_info.get("redelivered") else ""
    log.info("render: started in process %d%s", os.getpid(), again)
    anyio.run(run, task_id, scene, int(frames))
