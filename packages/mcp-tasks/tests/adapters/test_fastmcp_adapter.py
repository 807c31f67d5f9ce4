"""The FastMCP adapter: FastMCP's own task tools, served over real HTTP, on our Store."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import anyio
import httpx2 as httpx
import mcp_types as types
import pytest
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.utilities.tasks import TaskConfig
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError

from mcp_tasks import ANY_OWNER, RunnerOptions, Tasks, current_task_context
from mcp_tasks.adapters import fastmcp as fastmcp_adapter
from mcp_tasks.adapters.listen_middleware import TaskListenMiddleware
from mcp_tasks.client import TASKS_EXTENSION, TaskHandle, TaskState, start_tool, tasks_client
from mcp_tasks.stores.memory import MemoryTaskStore
from mcp_tasks.testing import RawClient, running

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mcp.client.session import ClientRequestContext

pytestmark = pytest.mark.anyio


NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}


def fastmcp_app() -> tuple[FastMCP, Tasks]:
    tasks = Tasks(store=MemoryTaskStore())
    mcp = FastMCP("adapter-test")
    mcp.add_extension(tasks.fastmcp_extension())

    @mcp.tool(task=True)
    async def double(n: int) -> int:
        await anyio.sleep(0.05)
        return n * 2

    @mcp.tool(task=TaskConfig(mode="required", poll_interval=timedelta(milliseconds=50)))
    async def must_be_task(flag: bool) -> str:
        if not flag:
            raise ToolError("flag was false")
        return "ok"

    @mcp.tool(task=True)
    async def nap() -> str:
        await anyio.sleep(600)
        return "rested"

    @mcp.tool(task=True)
    async def ask() -> str:
        task = current_task_context()
        assert task is not None
        await task.progress(1, 2, "about to ask")
        answer = await task.elicit("name", "Your name?", NAME_SCHEMA)
        content = answer.get("content")
        return f"hello {content['name'] if isinstance(content, dict) else '?'}"

    @mcp.tool(task=True)
    async def broken() -> str:
        raise MCPError(code=-32603, message="the job hit an internal error")

    @mcp.tool
    def plain(word: str) -> str:
        return word.upper()

    return mcp, tasks


async def decline(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult | types.ErrorData:
    return types.ElicitResult(action="decline")


def text_of(result: types.CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def test_a_task_tool_runs_as_a_task_on_our_store() -> None:
    """task=True answers a declaring client with a task whose record lives in our Store,
    and it completes with the tool's result."""
    mcp, tasks = fastmcp_app()
    async with running(mcp) as url, tasks_client(url) as client:
        assert TASKS_EXTENSION in (client.server_capabilities.extensions or {})
        handle = await start_tool(client, "double", {"n": 21})
        assert isinstance(handle, TaskHandle)
        record = await tasks.store.get(handle.task_id, ANY_OWNER)
        state = await handle.wait()
    assert record.work is not None, "the task was created in our store"
    assert state.status == "completed"
    assert text_of(state.call_tool_result()) == "42"


async def test_optional_tool_runs_inline_for_a_non_declaring_client() -> None:
    """Without the extension on the request, an optional task tool answers synchronously."""
    mcp, _ = fastmcp_app()
    async with running(mcp) as url, Client(url) as client:
        result = await client.call_tool("double", {"n": 4})
    assert text_of(result) == "8"


async def test_required_tool_refuses_a_non_declaring_client() -> None:
    """TaskConfig(mode="required") answers -32021 to a client that does not declare tasks."""
    mcp, _ = fastmcp_app()
    async with running(mcp) as url, Client(url) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("must_be_task", {"flag": True})
    assert raised.value.code == -32021


async def test_a_tool_error_completes_with_is_error() -> None:
    """FastMCP's ToolError inside a task is the tool's own error: completed + isError."""
    mcp, _ = fastmcp_app()
    async with running(mcp) as url, tasks_client(url) as client:
        handle = await start_tool(client, "must_be_task", {"flag": False})
        assert isinstance(handle, TaskHandle)
        state = await handle.wait()
    assert state.status == "completed"
    result = state.call_tool_result()
    assert result.is_error
    assert "flag was false" in text_of(result)


async def test_a_protocol_error_fails_the_task() -> None:
    """An MCPError a task body raises (FastMCP wraps it in a ToolError) ends the task
    failed with its code and message, and no result."""
    mcp, _ = fastmcp_app()
    async with running(mcp) as url, tasks_client(url) as client:
        handle = await start_tool(client, "broken", {})
        assert isinstance(handle, TaskHandle)
        state = await handle.wait()
    assert state.status == "failed"
    assert state.error is not None
    assert state.error == {"code": -32603, "message": "the job hit an internal error"}
    assert state.result is None


async def test_plain_tools_are_untouched() -> None:
    """A tool without task config never becomes a task, even for a declaring client."""
    mcp, _ = fastmcp_app()
    async with running(mcp) as url, tasks_client(url) as client:
        result = await start_tool(client, "plain", {"word": "hi"})
    assert isinstance(result, types.CallToolResult)
    assert text_of(result) == "HI"


async def test_tasks_methods_answer_through_the_engine() -> None:
    """tasks/get on an unknown id answers -32602; tasks/cancel cancels a running task."""
    mcp, _ = fastmcp_app()
    async with running(mcp) as url, tasks_client(url) as client:
        with pytest.raises(MCPError) as raised:
            await TaskHandle.attach(client, "unknown").get()
        handle = await start_tool(client, "nap", {})
        assert isinstance(handle, TaskHandle)
        await handle.cancel()
        state = await handle.wait()
    assert raised.value.code == types.INVALID_PARAMS
    assert state.status == "cancelled"


def test_fastmcp_is_imported_only_when_used() -> None:
    """`import mcp_tasks` and the CLI do not import fastmcp (it is an optional extra)."""
    probe = "import sys, mcp_tasks, mcp_tasks.cli; print('fastmcp' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"


async def test_a_task_body_asks_for_input_through_the_task_context() -> None:
    """current_task_context() inside a FastMCP task tool reports progress and elicits:
    the task goes input_required, the client answers with tasks/update, it completes.
    (The client declares elicitation through its callback; `answer` overrides it.)"""
    mcp, _ = fastmcp_app()
    statuses: list[str] = []

    async def answer(key: str, request: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"name": "Ada"}}

    async def on_status(state: TaskState) -> None:
        statuses.append(state.status)

    async with running(mcp) as url, tasks_client(url, elicitation_callback=decline) as client:
        handle = await start_tool(client, "ask", {})
        assert isinstance(handle, TaskHandle)
        state = await handle.wait(answer=answer, on_status=on_status)
    assert "input_required" in statuses
    assert text_of(state.call_tool_result()) == "hello Ada"


async def test_the_runner_starts_and_stops_cleanly_with_the_server() -> None:
    """The extension's lifespan runs the task runner while FastMCP serves and shuts it down
    without a lifespan error (FastMCP closes lifespans inside a shielding scope); `running`
    raises if the server's lifespan failed to shut down."""
    mcp, tasks = fastmcp_app()
    async with running(mcp) as url, tasks_client(url) as client:
        assert tasks.runner.running
        handle = await start_tool(client, "double", {"n": 2})
        assert isinstance(handle, TaskHandle)
        await handle.wait()
    assert not tasks.runner.running


def _runner_tasks() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == "mcp-tasks runner"]


async def test_shutdown_with_a_task_running_releases_its_lease_and_leaks_nothing() -> None:
    """Stopping the server while a task body runs: the body is stopped, its lease released
    (another node may claim the task at once, not after the lease expires), and no runner
    task outlives the lifespan."""
    mcp = FastMCP("shutdown-test")
    store = MemoryTaskStore()
    tasks = Tasks(store=store)
    mcp.add_extension(tasks.fastmcp_extension())
    body_started, body_stopped = anyio.Event(), anyio.Event()

    @mcp.tool(task=True)
    async def nap() -> str:
        body_started.set()
        try:
            await anyio.sleep(600)
        finally:
            body_stopped.set()
        return "rested"

    async with running(mcp) as url, tasks_client(url) as client:
        handle = await start_tool(client, "nap", {})
        assert isinstance(handle, TaskHandle)
        with anyio.fail_after(10):
            await body_started.wait()
        assert (await store.get(handle.task_id, ANY_OWNER)).claim is not None
        assert _runner_tasks()
    assert body_stopped.is_set()
    assert _runner_tasks() == []
    assert not tasks.runner.running
    record = await store.get(handle.task_id, ANY_OWNER)
    assert record.status.value == "working"
    assert record.claim is None


class _RunnerThatCannotStart(Tasks):
    """A Tasks whose runner fails on entry, as a broken store connection would."""

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        raise RuntimeError("the runner could not start")
        yield


async def test_a_runner_that_cannot_start_fails_the_lifespan() -> None:
    """The extension's lifespan raises the runner's start error instead of serving
    without a runner, and leaves no runner task behind."""
    extension = _RunnerThatCannotStart().fastmcp_extension()
    with pytest.raises(RuntimeError, match="could not start"):
        async with extension.lifespan():
            pass
    assert _runner_tasks() == []


class _StoreWithABrokenReaper(MemoryTaskStore):
    """A memory store whose reap has a bug (raises something no store may raise)."""

    async def reap(self, *, limit: int = 500) -> int:
        raise RuntimeError("reaper bug")


class _LogWatch(logging.Handler):
    """Sets ``seen`` when a record whose message contains ``text`` is logged."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.seen = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.seen.set()


async def test_a_runner_dying_while_serving_is_logged_at_once_and_raised_at_shutdown() -> None:
    """If the runner's task group dies while the server runs, the error is logged when it
    happens (not only at shutdown), and the lifespan's exit raises it.

    What is observed while serving is only recorded inside the block and asserted after
    it: the lifespan's exit raises the runner's group, which would replace any assertion
    error raised inside the block (the raises below would then pass regardless)."""
    tasks = Tasks(store=_StoreWithABrokenReaper(), runner=RunnerOptions(reap_interval_s=0.01))
    extension = tasks.fastmcp_extension()
    watch = _LogWatch("stopped while serving")
    adapter_logger = logging.getLogger(fastmcp_adapter.__name__)
    adapter_logger.addHandler(watch)
    observed: dict[str, bool] = {}

    async def serve_until_the_runner_dies() -> None:
        async with extension.lifespan():
            with anyio.fail_after(10):  # a failure timeout only
                await watch.seen.wait()
            # Reached only once the death was logged, with the server still serving.
            observed["runner running"] = tasks.runner.running

    try:
        with pytest.raises(BaseExceptionGroup) as caught:
            await serve_until_the_runner_dies()
    finally:
        adapter_logger.removeHandler(watch)
    assert observed == {"runner running": False}
    assert caught.group_contains(RuntimeError, match="reaper bug")
    assert _runner_tasks() == []


async def test_a_synchronous_call_asking_for_input_is_a_multi_round_trip() -> None:
    """A task tool called without the extension runs inline; when it asks for input the call
    answers ``input_required``, and the retry's ``inputResponses`` reach the body."""
    mcp, _ = fastmcp_app()
    answer = {"action": "accept", "content": {"name": "Alice"}}
    caps = {"elicitation": {}}
    async with running(mcp) as url, httpx.AsyncClient(timeout=10) as http:
        raw = RawClient(http, url)
        first = await raw.call("tools/call", {"name": "ask"}, capabilities=caps)
        second = await raw.call(
            "tools/call", {"name": "ask", "inputResponses": {"name": answer}}, capabilities=caps
        )
    assert first["result"]["resultType"] == "input_required"
    assert list(first["result"]["inputRequests"]) == ["name"]
    assert second["result"]["content"] == [{"type": "text", "text": "hello Alice"}]


async def test_the_listen_middleware_is_added_once_across_lifespans() -> None:
    """The extension adds the listen middleware to the SDK server under FastMCP when FastMCP
    binds it; FastMCP runs the lifespan (which adds it too) again for each server run, and
    the chain keeps one copy."""
    mcp, _ = fastmcp_app()
    chain = fastmcp_adapter.sdk_server_of(mcp).middleware
    assert sum(isinstance(m, TaskListenMiddleware) for m in chain) == 1
    for _ in range(2):
        async with running(mcp):
            pass
    assert sum(isinstance(m, TaskListenMiddleware) for m in chain) == 1
