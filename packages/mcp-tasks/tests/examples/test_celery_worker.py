"""The Celery example: the server sends a Celery job, Celery's own worker (a SEPARATE
process) runs it on RabbitMQ and drives the task by id through `TaskControl` on a shared
Postgres store; a worker killed mid-job has its job delivered again, and the task still
takes each write once.

Each run has its own Postgres schema for the task store and its own RabbitMQ queue, both
dropped afterwards. RabbitMQ is ``MCP_TASKS_TEST_RABBITMQ_URL`` (default: the machine's,
``amqp://guest:guest@127.0.0.1:5672//``); one that does not answer skips the tests
locally and fails them when ``CI`` is set, as a missing Postgres does
(``mcp_tasks_postgres.provision``).
"""

from __future__ import annotations

import os
import re
import runpy
import secrets
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
import pytest
from kombu import Connection, pools

from mcp_tasks import TaskControl, drop_namespace, namespaced_url
from mcp_tasks.client import TaskHandle, TaskState, start_tool, tasks_client
from mcp_tasks.testing import running
from mcp_tasks_contract import new_namespace

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from anyio.abc import Process
    from mcp.client.session import ClientRequestContext


pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "celery_worker"
RABBITMQ_URL_ENV = "MCP_TASKS_TEST_RABBITMQ_URL"
MACHINE_RABBITMQ = "amqp://guest:guest@127.0.0.1:5672//"
#: A hung worker fails the test with its log, however slow the machine.
TIMEOUT_S = 180


def text_of(result: types.CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def publish_yes(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult | types.ErrorData:
    return types.ElicitResult(action="accept", content={"publish": True})


@pytest.fixture(scope="session")
def rabbitmq_url() -> str:
    """RabbitMQ, once it accepted a connection: skip without it, fail when ``CI`` is set."""
    url = os.environ.get(RABBITMQ_URL_ENV, MACHINE_RABBITMQ)
    try:
        with Connection(url, connect_timeout=5) as connection:
            shown = connection.as_uri()  # the password masked
            connection.ensure_connection(max_retries=1)
    except Exception as error:
        message = f"RabbitMQ at {shown} accepts no connection ({error!r})"
        if os.environ.get("CI"):
            message += " (CI is set, so this fails instead of skipping)"
            pytest.fail(message, pytrace=False)
        pytest.skip(f"{message}; start one (Debian: rabbitmq-server) or set {RABBITMQ_URL_ENV}")
    return url


@pytest.fixture
async def example_env(
    postgres_url: str, rabbitmq_url: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[dict[str, str]]:
    """The example's environment: a fresh schema for the task store and a queue of its own
    on RabbitMQ; both dropped after."""
    namespace = new_namespace()
    env = {
        "MCP_TASKS_STORE_URL": namespaced_url(postgres_url, namespace),
        "CELERY_BROKER_URL": rabbitmq_url,
        "RENDER_QUEUE": f"render-{namespace}",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.delitem(sys.modules, "render_jobs", raising=False)  # loaded fresh, on env
    try:
        yield env
    finally:
        sys.modules.pop("render_jobs", None)
        # The broker connections the example's server opened to send jobs: Celery keeps
        # them in kombu's process-wide pools, which the next test's app would reuse.
        pools.reset()
        with Connection(rabbitmq_url) as connection:
            connection.default_channel.queue_delete(env["RENDER_QUEUE"])
        await drop_namespace(env["MCP_TASKS_STORE_URL"])


class Workers:
    """Celery workers of the example, each in its own process group, its log in a file."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        pythonpath = os.pathsep.join(filter(None, [str(EXAMPLE), os.environ.get("PYTHONPATH")]))
        self.env = {**os.environ, **env, "PYTHONPATH": pythonpath}
        self.logs = logs
        self.started: list[tuple[Process, Path]] = []
        # Node names unique to this test: Celery gives each node an exclusive queue
        # (``<name>.celery.pidbox``), and tests running at once on one broker would clash.
        self.suffix = secrets.token_hex(3)

    async def start(self, name: str, *, concurrency: int = 1) -> Process:
        log = self.logs / f"{name}.log"
        command = [sys.executable, "-m", "celery", "--app=render_jobs", "worker"]
        hostname = f"--hostname={name}-{self.suffix}@%h"
        command += [hostname, f"--concurrency={concurrency}", "--loglevel=INFO"]
        command += ["--without-mingle", "--without-gossip", "--without-heartbeat"]
        with log.open("wb") as sink:
            process = await anyio.open_process(
                command, env=self.env, stdout=sink, stderr=sink, start_new_session=True
            )
        self.started.append((process, log))
        return process

    def log_of(self, process: Process) -> str:
        return next(log for p, log in self.started if p is process).read_text()

    async def logged(self, process: Process, line: str) -> None:
        """Wait until the worker's log has ``line``."""
        while True:
            if line in self.log_of(process):
                return
            await anyio.sleep(0.1)

    def all_logs(self) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text()}" for _, log in self.started)

    async def kill(self, process: Process) -> None:
        """SIGKILL the worker and its pool processes (the machine or container died)."""
        os.killpg(process.pid, signal.SIGKILL)
        await process.wait()

    async def stop_all(self) -> None:
        for process, _ in self.started:
            if process.returncode is None:
                os.killpg(process.pid, signal.SIGKILL)
                await process.wait()


@pytest.fixture
async def workers(example_env: dict[str, str], tmp_path: Path) -> AsyncIterator[Workers]:
    started = Workers(example_env, tmp_path)
    try:
        yield started
    finally:
        await started.stop_all()


@pytest.fixture
async def example(example_env: dict[str, str]) -> AsyncIterator[dict[str, Any]]:
    """The example server's module globals (``mcp``, ``tasks``), on the test's env; its
    store closed after."""
    loaded = runpy.run_path(str(EXAMPLE / "server.py"))
    try:
        yield loaded
    finally:
        await loaded["tasks"].store.close()


def frames_seen(states: list[TaskState]) -> list[int]:
    found = (re.fullmatch(r"rendered frame (\d+)/\d+", s.status_message or "") for s in states)
    return [int(match[1]) for match in found if match]


async def test_a_celery_worker_drives_deferred_tasks(
    example: dict[str, Any], workers: Workers
) -> None:
    """One task is rendered, asks to publish and completes; another is cancelled by the
    client and its job stops on it. Celery's worker runs in its own process."""
    server = example["mcp"]
    try:
        with anyio.fail_after(TIMEOUT_S):
            async with (
                running(server) as url,
                tasks_client(url, elicitation_callback=publish_yes) as c,
            ):
                first = await start_tool(c, "render", {"scene": "teapot", "frames": 2})
                second = await start_tool(c, "render", {"scene": "forest", "frames": 10_000})
                assert isinstance(first, TaskHandle)
                assert isinstance(second, TaskHandle)
                assert first.created is not None
                assert first.created.status_message == "queued for the render farm"
                worker = await workers.start("renderer", concurrency=2)
                seen: list[TaskState] = []
                finished = await first.wait(on_status=seen.append)
                async for state in second.watch():
                    if state.status_message and state.status_message.startswith("rendered frame"):
                        await second.cancel()  # the job is on it: cancel mid-render
                cancelled = await second.get()
                await workers.logged(worker, "render: cancelled by the client")
    except TimeoutError:
        pytest.fail(f"no outcome within {TIMEOUT_S} s; the workers' logs:\n{workers.all_logs()}")
    output = workers.all_logs()
    assert finished.status == "completed"
    assert text_of(finished.call_tool_result()) == "rendered teapot (2 frames), published"
    assert any(s.status == "input_required" for s in seen)
    assert cancelled.status == "cancelled"
    assert output.count("render: started") == 2, output  # Celery ran each job once…
    assert "delivered again" not in output
    assert first.task_id not in output  # …and never logged a task id (a bearer capability)
    assert second.task_id not in output


@pytest.mark.parametrize("killed", ["worker", "pool process"])
async def test_a_killed_workers_job_runs_again_and_the_task_takes_each_write_once(
    example: dict[str, Any], workers: Workers, killed: str
) -> None:
    """A worker SIGKILLed mid-job (its whole process group, or only the pool process
    running the job) never acknowledged the job: RabbitMQ delivers it again to a new worker
    (a new pool process), which repeats the job's steps. The store applies each step's
    write once (event ids): the task's revision counts every frame, the question, the
    answer and the result exactly once, the client never sees the frames go back, and the
    task completes once, with the result."""
    server = example["mcp"]
    frames = 4
    control = TaskControl(example["tasks"].store, notifier=None)
    try:
        with anyio.fail_after(TIMEOUT_S):
            async with (
                running(server) as url,
                tasks_client(url, elicitation_callback=publish_yes) as c,
            ):
                handle = await start_tool(c, "render", {"scene": "teapot", "frames": frames})
                assert isinstance(handle, TaskHandle)
                created = await control.status(handle.task_id)
                first = await workers.start("first")
                seen: list[TaskState] = []
                # Nobody answers the question yet, so the job cannot end before the kill.
                async for state in handle.watch():
                    seen.append(state)
                    if frames_seen([state]):
                        break
                if killed == "worker":
                    await workers.kill(first)
                    await workers.start("second")
                else:
                    pool = re.search(r"render: started in process (\d+)", workers.log_of(first))
                    assert pool is not None, workers.log_of(first)
                    os.kill(int(pool[1]), signal.SIGKILL)
                finished = await handle.wait(on_status=seen.append)
                record = await control.status(handle.task_id)
    except TimeoutError:
        pytest.fail(f"no outcome within {TIMEOUT_S} s; the workers' logs:\n{workers.all_logs()}")
    output = workers.all_logs()
    assert finished.status == "completed"
    assert text_of(finished.call_tool_result()) == f"rendered teapot ({frames} frames), published"
    # Every write once: the frames, the question, the client's answer and the result.
    assert record.revision == created.revision + frames + 3
    steps = sorted(event.event_id for event in record.recent_events)
    assert steps == sorted([*(f"frame-{n}" for n in range(1, frames + 1)), "ask-publish", "result"])
    assert output.count("render: started") == 2, output  # ran, killed, delivered again…
    assert output.count("(delivered again)") == 1, output
    assert re.search(r"render: frame \d/\d duplicate", output), output  # …repeated its steps
    assert output.count("render: result applied") == 1, output
    shown = frames_seen(seen)
    assert shown == sorted(shown), f"the client saw the frames go back: {shown}"
    assert handle.task_id not in output
