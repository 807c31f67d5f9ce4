"""The manual-mode example: the server defers, a worker in a SEPARATE process drives the
task by id through `TaskControl` on a shared SQLite store."""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import mcp_types as types
import pytest

from mcp_tasks.client import TaskHandle, TaskState, start_tool, tasks_client
from mcp_tasks.testing import running

if TYPE_CHECKING:
    from mcp.client.session import ClientRequestContext

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "external_worker"


def text_of(result: types.CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def publish_yes(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult | types.ErrorData:
    return types.ElicitResult(action="accept", content={"publish": True})


async def test_a_worker_process_drives_deferred_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One task is rendered, asks to publish and completes; another is cancelled by the
    client and the worker stops on it. The worker is a real subprocess on the same store."""
    pytest.importorskip("mcp_tasks_sqlite", reason="the example needs the SQLite store")
    store_url = f"sqlite:///{tmp_path / 'tasks.db'}"
    jobs = tmp_path / "jobs"
    monkeypatch.setenv("MCP_TASKS_STORE_URL", store_url)
    monkeypatch.setenv("JOBS_DIR", str(jobs))
    monkeypatch.syspath_prepend(str(EXAMPLE))
    example = runpy.run_path(str(EXAMPLE / "server.py"))
    server, tasks = example["mcp"], example["tasks"]
    worker = await anyio.open_process(
        [sys.executable, str(EXAMPLE / "worker.py"), "--max-jobs", "2"],
        env={**os.environ, "MCP_TASKS_STORE_URL": store_url, "JOBS_DIR": str(jobs)},
        stdout=None,
        stderr=None,
    )
    try:
        async with running(server) as url, tasks_client(url, elicitation_callback=publish_yes) as c:
            first = await start_tool(c, "render", {"scene": "teapot", "frames": 2})
            assert isinstance(first, TaskHandle)
            assert first.created is not None
            assert first.created.status_message == "queued for the render farm"
            seen: list[TaskState] = []

            async def record(state: TaskState) -> None:
                seen.append(state)

            finished = await first.wait(on_status=record)

            second = await start_tool(c, "render", {"scene": "forest", "frames": 10_000})
            assert isinstance(second, TaskHandle)
            async for state in second.watch():
                if state.status_message and state.status_message.startswith("rendered frame"):
                    await second.cancel()  # the worker is on it: cancel mid-render
            cancelled = await second.get()
        with anyio.fail_after(60):
            code = await worker.wait()
    finally:
        if worker.returncode is None:
            worker.kill()
            await worker.wait()
        await tasks.store.close()
    assert finished.status == "completed"
    assert text_of(finished.call_tool_result()) == "rendered teapot (2 frames), published"
    assert any(s.status == "input_required" for s in seen)
    assert cancelled.status == "cancelled"
    assert code == 0, "the worker stopped on the cancelled task and exited after two jobs"
