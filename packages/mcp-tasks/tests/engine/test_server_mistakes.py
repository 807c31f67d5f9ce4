"""A server's own mistakes answer as server errors; a null extension entry declares nothing."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent

from mcp_tasks import MemoryBackend, MemoryTaskStore, RequestView, RunnerOptions, Tasks, TaskStatus
from mcp_tasks.domain.rules import ANY_OWNER
from mcp_tasks.engine import ToolOptions, result_to_change

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

pytestmark = pytest.mark.anyio

TASKS = "io.modelcontextprotocol/tasks"
EXT: dict[str, Any] = {"extensions": {TASKS: {}}}
MISSING_TASKS = {
    "code": -32021,
    "message": ("Missing required client capability: the io.modelcontextprotocol/tasks extension"),
    "data": {"requiredCapabilities": EXT},
}


class Harness:
    def __init__(self) -> None:
        self.backend = MemoryBackend()
        # The lease is shorter than every TTL the tests choose (a live lease holds its task).
        self.tasks = Tasks(
            store=MemoryTaskStore(backend=self.backend),
            runner=RunnerOptions(lease_ms=2_000, heartbeat_ms=500),
        )

    async def call(
        self,
        options: ToolOptions,
        caps: Mapping[str, Any] | None = None,
        *,
        body: Any = None,
        arguments: Mapping[str, Any] | None = None,
    ) -> Any:
        async def call_next() -> Any:
            if body is not None:
                return await body()
            return CallToolResult(content=[TextContent(type="text", text="ok")])

        return await self.tasks.engine.handle_tool_call(
            RequestView(
                protocol_version="2026-07-28", client_capabilities=EXT if caps is None else caps
            ),
            name="deploy",
            arguments=arguments or {},
            input_responses=None,
            call_next=call_next,
            options=options,
        )


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    h = Harness()
    async with h.tasks.running():
        yield h


# --- a null (or any non-object) extension entry declares nothing --------------------------


@pytest.mark.parametrize("value", [None, True, "yes", 1, []])
def test_a_non_object_extension_entry_declares_nothing(value: object) -> None:
    """``extensions: {tasks: null}`` (or any non-object) is not a declaration; ``{}`` is."""
    assert not RequestView("2026-07-28", {"extensions": {TASKS: value}}).declares_tasks
    assert RequestView("2026-07-28", {"extensions": {TASKS: {}}}).declares_tasks
    assert RequestView("2026-07-28", {"extensions": {TASKS: {"x": 1}}}).declares_tasks


async def test_a_null_extension_entry_gets_no_task(harness: Harness) -> None:
    """A required tool answers -32021 to ``{tasks: null}``; an optional one runs synchronously."""
    null_caps = {"extensions": {TASKS: None}}
    with pytest.raises(MCPError) as caught:
        await harness.call(ToolOptions(mode="required"), null_caps)
    assert caught.value.error.model_dump(exclude_none=True) == MISSING_TASKS
    assert isinstance(await harness.call(ToolOptions(mode="optional"), null_caps), CallToolResult)
    assert harness.backend.tasks == {}


async def test_tasks_methods_refuse_a_null_extension_entry(harness: Harness) -> None:
    """tasks/get with ``{tasks: null}``: -32021, before any lookup."""
    with pytest.raises(MCPError) as caught:
        await harness.tasks.engine.handle_tasks_method(
            RequestView("2026-07-28", {"extensions": {TASKS: None}}),
            "tasks/get",
            {"taskId": "gate-test"},
        )
    assert caught.value.error.model_dump(exclude_none=True) == MISSING_TASKS


# --- a body returning a CreateTaskResult fails its task ------------------------------------


def test_a_create_task_result_is_no_tool_result(caplog: pytest.LogCaptureFixture) -> None:
    """``resultType: "task"`` from a body ends the task failed -32603, logged."""
    with caplog.at_level(logging.ERROR, logger="mcp_tasks.engine.core"):
        change = result_to_change(
            {"resultType": "task", "taskId": "abcdef123456", "status": "working"}
        )
    assert change.error == {  # type: ignore[union-attr]
        "code": -32603,
        "message": "The tool returned a task instead of a result",
    }
    assert "returned a CreateTaskResult" in caplog.text
    assert "abcdef123456" not in caplog.text


async def test_a_body_returning_a_task_handle_fails_the_task(harness: Harness) -> None:
    """End to end at the engine: the task is ``failed`` (-32603), not ``completed``."""

    async def body() -> dict[str, Any]:
        return {"resultType": "task", "taskId": "x", "status": "working"}

    created = await harness.call(ToolOptions(mode="required"), body=body)
    with anyio.fail_after(10):
        while True:
            record = await harness.tasks.store.get(created["taskId"], ANY_OWNER)
            if record.status.is_terminal:
                break
            await anyio.sleep(0.01)
    assert record.status is TaskStatus.FAILED
    assert record.error == {
        "code": -32603,
        "message": "The tool returned a task instead of a result",
    }


# --- a ttl_ms function's bad answer is the server's error ---------------------------------


@pytest.mark.parametrize("bad", [0, -5, 1.5, "60000", True])
async def test_a_bad_ttl_from_a_function_is_a_server_error(
    harness: Harness, caplog: pytest.LogCaptureFixture, bad: object
) -> None:
    """-32603 naming the tool's TTL (not -32602 blaming the client); the log names the tool
    and the value; no task is created."""
    with (
        caplog.at_level(logging.ERROR, logger="mcp_tasks.engine.core"),
        pytest.raises(MCPError) as caught,
    ):
        await harness.call(ToolOptions(mode="required", ttl_ms=lambda arguments: bad))  # type: ignore[arg-type,return-value]
    assert caught.value.error.model_dump(exclude_none=True) == {
        "code": -32603,
        "message": "The tool's ttl_ms gave an invalid TTL",
    }
    assert "tool 'deploy'" in caplog.text
    assert repr(bad) in caplog.text
    assert harness.backend.tasks == {}


async def test_good_ttls_from_a_function_are_kept(harness: Harness) -> None:
    """A positive integer or None from the function is the task's TTL."""
    first = await harness.call(ToolOptions(mode="required", ttl_ms=lambda arguments: 5_000))
    second = await harness.call(ToolOptions(mode="required", ttl_ms=lambda arguments: None))
    assert (first["ttlMs"], second["ttlMs"]) == (5_000, None)


@pytest.mark.parametrize("bad", [0, -1, True, 2.5])
def test_a_bad_fixed_ttl_is_refused_at_registration(bad: object) -> None:
    """A fixed ttl_ms that no task can have is refused when the tool is registered."""
    with pytest.raises(ValueError, match="ttl_ms must be a positive integer, None or a function"):
        ToolOptions(ttl_ms=bad)  # type: ignore[arg-type]


async def test_over_http_a_null_extension_entry_is_answered_400_missing_capability() -> None:
    """Over real HTTP: ``{tasks: null}`` on tasks/get is 400 -32021 (not a lookup); a
    required tool is refused too."""
    import httpx2 as httpx  # noqa: PLC0415
    from mcp.server.mcpserver import MCPServer  # noqa: PLC0415

    from mcp_tasks.testing import RawClient, decode, running_asgi  # noqa: PLC0415

    tasks = Tasks()
    mcp: MCPServer[Any] = MCPServer("null", extensions=[tasks.extension()], lifespan=tasks.lifespan)

    @tasks.tool(mcp, mode="required")
    async def deploy() -> str:
        return "never"

    null_caps = {"extensions": {TASKS: None}}
    async with (
        running_asgi(mcp.streamable_http_app()) as url,
        httpx.AsyncClient(timeout=10) as http,
    ):
        raw = RawClient(http, url)
        get = await raw.post("tasks/get", {"taskId": "gate-test"}, capabilities=null_caps)
        call = await raw.post("tools/call", {"name": "deploy"}, capabilities=null_caps)
    assert get.status_code == 400
    assert decode(get)["error"] == MISSING_TASKS
    # On tools/call the SDK's own schema check of `_meta` answers first (an extension's
    # settings must be an object): -32602, and no task either way.
    assert call.status_code == 400
    assert decode(call)["error"]["code"] == -32602
