"""Tasks over stdio: the official SDK's client launches ``stdio_app.py`` as a subprocess
(``StdioServerParameters``) and drives a task through it: progress, an input round, a
cancel, on the memory store and on SQLite. On SQLite, a task started by one stdio server
process is finished by the next one, which the client re-attaches to by id.

The ``fail_after`` bounds only keep a broken run from hanging: each covers a process start.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
import pytest
from mcp.client.stdio import StdioServerParameters

from mcp_tasks.client import TaskHandle, TaskState, start_tool, tasks_client

if TYPE_CHECKING:
    from mcp.client.session import ClientRequestContext

pytestmark = pytest.mark.anyio

APP = Path(__file__).resolve().parent / "stdio_app.py"
BOUND_S = 60


def server(store_url: str, *args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(APP), store_url, *args])


@pytest.fixture(params=["memory", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'tasks.db'}"


async def poll_until(handle: TaskHandle, done: Any) -> TaskState:
    """``tasks/get`` until ``done(state)``."""
    while not done(state := await handle.get()):  # noqa: ASYNC110 (the server is another process)
        await anyio.sleep(0.05)
    return state


async def test_a_task_over_stdio_reports_progress_asks_and_completes(store_url: str) -> None:
    """A task created over stdio shows its progress, parks input_required with the body's
    question, takes the answer the client's elicitation callback gives, and completes."""
    asked: list[str] = []

    async def note(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"note": "fragile"})

    with anyio.fail_after(BOUND_S):
        async with tasks_client(server(store_url), elicitation_callback=note) as client:
            handle = await start_tool(client, "progress_then_wait", {"item": "vase"})
            assert isinstance(handle, TaskHandle)
            parked = await poll_until(handle, lambda s: s.status == "input_required")
            final = await handle.wait()
    assert parked.status_message == "prepared vase (1/2)"  # ctx.progress(1, 2, …)
    assert list(parked.input_requests or {}) == ["note"]
    assert asked == ["A note for vase?"]
    assert final.status == "completed"
    text = final.call_tool_result().content[0]
    assert isinstance(text, types.TextContent)
    assert text.text == "vase: accept (fragile)"


async def test_a_task_over_stdio_is_cancelled(store_url: str) -> None:
    """tasks/cancel over stdio stops a running body: the task ends cancelled."""
    with anyio.fail_after(BOUND_S):
        async with tasks_client(server(store_url)) as client:
            handle = await start_tool(client, "forever", {})
            assert isinstance(handle, TaskHandle)
            await poll_until(handle, lambda s: s.status_message == "running")
            await handle.cancel()
            final = await poll_until(handle, lambda s: s.status != "working")
    assert final.status == "cancelled"


async def test_a_task_outlives_its_stdio_server_on_sqlite(tmp_path: Path) -> None:
    """On SQLite a task started by one stdio server process survives that process: the
    client launches a new one on the same file, re-attaches by id, and the new process
    runs the task to completion (its body ends only in a process started with ``finish``)."""
    store_url = f"sqlite:///{tmp_path / 'tasks.db'}"
    with anyio.fail_after(BOUND_S):
        async with tasks_client(server(store_url)) as first:
            handle = await start_tool(first, "handover", {})
            assert isinstance(handle, TaskHandle)
            started = await poll_until(handle, lambda s: s.status_message is not None)
            task_id = handle.task_id
        # The first process is gone: the client closed its stdin and reaped it.
        async with tasks_client(server(store_url, "finish")) as second:
            final = await TaskHandle.attach(second, task_id).wait()
    assert started.status_message is not None
    first_pid = started.status_message.removeprefix("started in ")
    assert final.status == "completed"
    text = final.call_tool_result().content[0]
    assert isinstance(text, types.TextContent)
    assert text.text.startswith("finished in ")
    assert text.text.removeprefix("finished in ") != first_pid
