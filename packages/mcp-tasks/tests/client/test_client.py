"""The tasks client helper against a real SEP-2663 server over real HTTP."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import httpx2 as httpx
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

import mcp_tasks.client as client_module
from mcp_tasks import Tasks
from mcp_tasks.cli.demo_tools import demo_server
from mcp_tasks.client import (
    TASKS_EXTENSION,
    TaskFailed,
    TaskHandle,
    TasksClientExtension,
    TaskState,
    TaskWasCancelled,
    start_tool,
    tasks_client,
)
from mcp_tasks.stores.memory import MemoryTaskStore
from mcp_tasks.tasks import tasks_served_by
from mcp_tasks.testing import running

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mcp.client.session import ClientRequestContext

pytestmark = pytest.mark.anyio


async def say_yes(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult | types.ErrorData:
    return types.ElicitResult(action="accept", content={"confirm": True})


def text_of(result: types.CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def test_start_tool_returns_a_handle_that_watches_to_completion(demo_url: str) -> None:
    """A task tool answers with a handle; watch yields each change and ends at completed."""
    async with tasks_client(demo_url) as client:
        handle = await start_tool(client, "build", {"ref": "v1"})
        assert isinstance(handle, TaskHandle)
        assert handle.created is not None
        assert handle.created.status == "working"
        seen: list[TaskState] = [state async for state in handle.watch()]
    assert seen[-1].status == "completed"
    assert all(not s.is_terminal for s in seen[:-1])
    signatures = [(s.status, s.status_message) for s in seen]
    assert len(signatures) == len(set(signatures)), "watch yields changes only"
    assert "built v1" in text_of(seen[-1].call_tool_result())


async def test_call_tool_resolves_a_task_transparently_answering_input(demo_url: str) -> None:
    """With the extension, plain call_tool waits for the task and answers its input request
    through the client's elicitation callback."""
    async with tasks_client(demo_url, elicitation_callback=say_yes) as client:
        result = await client.call_tool("deploy", {"env": "prod"})
    assert not result.is_error
    assert text_of(result) == "deployed to prod"


async def test_wait_answers_input_with_a_custom_answerer(demo_url: str) -> None:
    """wait() asks the answerer once per outstanding key and reports each status."""
    asked: list[str] = []
    statuses: list[str] = []

    async def answer(key: str, request: dict[str, Any]) -> dict[str, Any]:
        asked.append(key)
        assert request["method"] == "elicitation/create"
        return {"action": "decline"}

    async def on_status(state: TaskState) -> None:
        statuses.append(state.status)

    async with tasks_client(demo_url, elicitation_callback=say_yes) as client:
        handle = await start_tool(client, "deploy", {})
        assert isinstance(handle, TaskHandle)
        state = await handle.wait(answer=answer, on_status=on_status)
    assert asked == ["confirm"]
    assert "input_required" in statuses
    assert state.status == "completed"
    result = state.call_tool_result()
    assert result.is_error, "a declined deploy is the tool's own error: completed + isError"


async def test_on_status_and_answer_may_be_plain_functions(demo_url: str) -> None:
    """`TasksClientExtension(on_status=…, answer=…)` takes plain functions as well as
    coroutine functions: a plain call_tool runs the deploy to its end through them."""
    statuses: list[str] = []
    asked: list[str] = []

    def on_status(state: TaskState) -> None:
        statuses.append(state.status)

    def answer(key: str, request: dict[str, Any]) -> dict[str, Any]:
        asked.append(key)
        return {"action": "accept", "content": {"confirm": True}}

    extension = TasksClientExtension(on_status=on_status, answer=answer)
    # The callback declares elicitation (deploy asks); `answer` is what answers.
    async with tasks_client(demo_url, extension=extension, elicitation_callback=say_yes) as client:
        result = await client.call_tool("deploy", {"env": "qa"})
    assert text_of(result) == "deployed to qa"
    assert asked == ["confirm"]
    assert "input_required" in statuses  # told each change, by a plain function
    assert statuses[-1] == "completed"


async def test_cancel_ends_the_task_cancelled(demo_url: str) -> None:
    """tasks/cancel moves a running task to cancelled; its result raises TaskWasCancelled."""
    async with tasks_client(demo_url) as client:
        handle = await start_tool(client, "sleep", {"seconds": 600})
        assert isinstance(handle, TaskHandle)
        await handle.cancel()
        state = await handle.wait()
    assert state.status == "cancelled"
    with pytest.raises(TaskWasCancelled):
        state.call_tool_result()


async def test_a_task_is_reachable_by_id_from_another_client(demo_url: str) -> None:
    """A handle attached by id alone (a new connection) reads and cancels the same task."""
    async with tasks_client(demo_url) as first:
        handle = await start_tool(first, "sleep", {"seconds": 600})
        assert isinstance(handle, TaskHandle)
        task_id = handle.task_id
    async with tasks_client(demo_url) as second:
        again = TaskHandle.attach(second, task_id)
        assert (await again.get()).status == "working"
        await again.cancel()
        assert (await again.get()).status == "cancelled"


async def test_unknown_task_id_is_invalid_params(demo_url: str) -> None:
    """tasks/get for an id the server never issued answers -32602."""
    async with tasks_client(demo_url) as client:
        with pytest.raises(MCPError) as raised:
            await TaskHandle.attach(client, "no-such-task").get()
    assert raised.value.code == types.INVALID_PARAMS


@pytest.fixture
async def strict_demo_url() -> AsyncIterator[str]:
    """The demo tools on a server that refuses tasks/* without Mcp-Name."""
    server = demo_server(MemoryTaskStore(), step_seconds=0.05, log_level="WARNING")
    (tasks,) = tasks_served_by(server)
    tasks.engine.options = replace(tasks.engine.options, require_name_header=True)
    async with running(server) as url:
        yield url


async def test_requests_carry_mcp_name(strict_demo_url: str) -> None:
    """A strict server rejects tasks/get without Mcp-Name (-32020), so the handle's
    successful reads prove the client sends it; the raw request shows the rejection."""
    demo_url = strict_demo_url
    async with tasks_client(demo_url) as client:
        handle = await start_tool(client, "sleep", {"seconds": 600})
        assert isinstance(handle, TaskHandle)
        await handle.get()
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tasks/get",
            "params": {
                "taskId": handle.task_id,
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
                    "io.modelcontextprotocol/clientCapabilities": {
                        "extensions": {TASKS_EXTENSION: {}}
                    },
                },
            },
        }
        headers = {
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tasks/get",
            "Accept": "application/json, text/event-stream",
        }
        async with httpx.AsyncClient() as raw:
            response = await raw.post(demo_url, json=body, headers=headers)
        await handle.cancel()
    assert response.json()["error"]["code"] == -32020


async def test_without_the_extension_no_task_is_returned(demo_url: str) -> None:
    """A client that does not declare tasks gets an optional tool's result inline and
    -32021 for a tool that requires a task."""
    async with Client(demo_url) as client:
        result = await client.call_tool("build", {"ref": "inline"})
        assert "built inline" in text_of(result)
        with pytest.raises(MCPError) as raised:
            await client.call_tool("sleep", {"seconds": 1})
    assert raised.value.code == -32021


async def test_a_failed_task_raises_task_failed() -> None:
    """A tool raising a JSON-RPC error ends failed; the client raises TaskFailed with it."""
    tasks = Tasks(store=MemoryTaskStore())
    mcp = MCPServer("failing", extensions=[tasks.extension()], lifespan=tasks.lifespan)

    @tasks.tool(mcp, mode="required", poll_interval_ms=50)
    async def explode() -> str:
        raise MCPError(-32000, "the reactor is out of coolant")

    async with running(mcp) as url, tasks_client(url) as client:
        with pytest.raises(TaskFailed) as raised:
            await client.call_tool("explode", {})
    assert raised.value.code == -32000
    assert raised.value.state.status == "failed"


async def test_watch_waits_the_poll_interval_the_server_asks_for(
    demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between two polls, watch waits exactly the pollIntervalMs of the latest tasks/get
    (a handle made on the bare session: it polls, the server's pushes aside)."""
    polled: list[TaskState] = []
    waited: list[float] = []
    real_get, real_sleep = TaskHandle.get, client_module._sleep

    async def get(self: TaskHandle) -> TaskState:
        state = await real_get(self)
        polled.append(state)
        return state

    async def sleep(seconds: float) -> None:
        waited.append(seconds)
        await real_sleep(seconds)

    monkeypatch.setattr(TaskHandle, "get", get)
    monkeypatch.setattr(client_module, "_sleep", sleep)
    async with tasks_client(demo_url) as client:
        # A 1 s task outlives the first poll by far more than one round trip, even when slow.
        started = await start_tool(client, "sleep", {"seconds": 1})
        assert isinstance(started, TaskHandle)
        await TaskHandle(started.session, started.task_id, started.created).wait()
    assert waited, "the task outlives the first poll"
    assert len(waited) == len(polled) - 1, "no wait after the terminal state"
    for seconds, state in zip(waited, polled, strict=False):
        assert state.poll_interval_ms is not None
        assert seconds == state.poll_interval_ms / 1000
