"""examples/external_worker.py: a manual-mode task driven to completion by a separate worker."""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
from protocol_http import RawClient, serve

from mcp_tasks import TaskControl, Tasks

pytestmark = pytest.mark.anyio

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location(
        "external_worker", EXAMPLES / "external_worker.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def drive(client: RawClient) -> dict[str, Any]:
    """Call render, answer the worker's question, and return the completed task."""
    created = (await client.call("tools/call", {"name": "render", "arguments": {"scene": "s1"}}))[
        "result"
    ]
    assert created["resultType"] == "task"
    assert created["statusMessage"] == "Queued"
    task_id = created["taskId"]
    with anyio.fail_after(20):
        while True:
            task = (await client.call("tasks/get", {"taskId": task_id}))["result"]
            if task["status"] == "input_required":
                await client.call(
                    "tasks/update",
                    {"taskId": task_id, "inputResponses": {"publish": {"action": "accept"}}},
                )
            elif task["status"] in ("completed", "failed", "cancelled"):
                return task  # type: ignore[no-any-return]
            await anyio.sleep(0.05)


async def test_worker_drives_the_task_by_id(tmp_path: Path) -> None:
    """In one process on the memory store: the worker completes the deferred task by id."""
    example = load_example()
    tasks = Tasks()
    app = example.build(tasks, tmp_path).streamable_http_app()
    async with (
        serve(app) as url,
        httpx.AsyncClient(timeout=10) as http,
        anyio.create_task_group() as tg,
    ):
        control = TaskControl(tasks.store)

        async def worker() -> None:
            while True:
                async for job in anyio.Path(tmp_path).glob("*.json"):
                    await job.rename(job.with_suffix(".running"))
                    await example.work_one(control, job.stem, {"scene": "s1", "frames": 2})
                await anyio.sleep(0.05)

        tg.start_soon(worker)
        done = await drive(RawClient(http, url))
        tg.cancel_scope.cancel()
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "Rendered s1 (2 frames), published"


@pytest.mark.skipif(
    importlib.util.find_spec("mcp_tasks_sqlite") is None,
    reason="needs a Store two processes share: mcp-tasks-sqlite is not installed",
)
async def test_worker_in_a_separate_process(tmp_path: Path) -> None:
    """Server and worker are two OS processes sharing a SQLite Store and a spool directory."""
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    spool = tmp_path / "spool"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    script = str(EXAMPLES / "external_worker.py")
    common = ["--store", store, "--spool", str(spool)]
    # Two real OS processes are the point of this test; starting them may block briefly.
    server = subprocess.Popen([sys.executable, script, "serve", *common, "--port", str(port)])  # noqa: ASYNC220
    worker = subprocess.Popen([sys.executable, script, "work", *common])  # noqa: ASYNC220
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        async with httpx.AsyncClient(timeout=10) as http:
            with anyio.fail_after(30):
                while True:
                    try:
                        await http.get(url)
                        break
                    except httpx.TransportError:
                        await anyio.sleep(0.1)
            done = await drive(RawClient(http, url))
        assert done["status"] == "completed"
        assert done["result"]["content"][0]["text"] == "Rendered s1 (3 frames), published"
    finally:
        for process in (server, worker):
            process.terminate()
            process.wait(timeout=10)
