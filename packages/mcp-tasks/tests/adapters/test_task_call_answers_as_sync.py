"""A task call answers as the same synchronous call would, on both SDKs: arguments the
tool's input validation refuses never become a task (the SDK's own answer, no row), and a
tool's error reads in the task exactly as it reads without a task. "The SDK's own answer"
is a server of the same tools without mcp-tasks (the extension's interceptor also sits in
the synchronous path of a task tool, so that alone proves nothing)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

import mcp_types as types
import pytest
from fastmcp import FastMCP
from fastmcp.tools import Tool as FastMCPTool
from fastmcp.tools.base import ToolResult
from fastmcp.utilities.tasks import TaskConfig
from mcp.client.client import Client
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer

from mcp_tasks import MemoryBackend, MemoryTaskStore, TaskContext, Tasks
from mcp_tasks.adapters.sdk import mcpserver_tool_call
from mcp_tasks.client import TaskHandle, start_tool, tasks_client
from mcp_tasks.domain.models import Complete
from mcp_tasks.testing import running

if TYPE_CHECKING:
    from collections.abc import Callable

    from mcp.server.context import ServerRequestContext

    from mcp_tasks.runtime.context import RunningTaskContext

pytestmark = pytest.mark.anyio

#: Arguments the tool ``crunch(steps: int)`` refuses: not an integer, missing, unknown type.
BAD_ARGUMENTS = [{"steps": "abc"}, {}, {"steps": {"ok": True}}]


def sdk_app(backend: MemoryBackend) -> MCPServer[Any]:
    tasks = Tasks(store=MemoryTaskStore(backend=backend))
    mcp: MCPServer[Any] = MCPServer(
        "answers", extensions=[tasks.extension()], lifespan=tasks.lifespan
    )

    @tasks.tool(mcp, mode="optional")
    async def crunch(steps: int, ctx: TaskContext) -> str:
        return f"crunched {steps}"

    @tasks.tool(mcp, mode="optional")
    async def boom() -> str:
        raise ValueError("the disk is full")

    return mcp


def fastmcp_app(backend: MemoryBackend) -> FastMCP:
    return fastmcp_parts(backend)[0]


def fastmcp_parts(backend: MemoryBackend, *, with_tasks: bool = True) -> tuple[FastMCP, Tasks]:
    """The task tools on a FastMCP server; ``with_tasks=False``: one without the extension,
    to be mounted into a server that has it."""
    tasks = Tasks(store=MemoryTaskStore(backend=backend))
    mcp = FastMCP("answers")
    if with_tasks:
        mcp.add_extension(tasks.fastmcp_extension())

    @mcp.tool(task=True)
    async def crunch(steps: int) -> str:
        return f"crunched {steps}"

    @mcp.tool(task=True)
    async def boom() -> str:
        raise ValueError("the disk is full")

    return mcp, tasks


def sdk_reference(**server_options: Any) -> MCPServer[Any]:
    """The same tools on a plain MCPServer, no tasks: the SDK's own synchronous answers."""
    mcp: MCPServer[Any] = MCPServer("answers", **server_options)

    @mcp.tool()
    async def crunch(steps: int) -> str:
        return f"crunched {steps}"

    @mcp.tool()
    async def boom() -> str:
        raise ValueError("the disk is full")

    return mcp


def fastmcp_reference() -> FastMCP:
    """The same tools on a plain FastMCP server, no tasks: FastMCP's own answers."""
    mcp = FastMCP("answers")

    @mcp.tool
    async def crunch(steps: int) -> str:
        return f"crunched {steps}"

    @mcp.tool
    async def boom() -> str:
        raise ValueError("the disk is full")

    return mcp


def sdk_registered_app(backend: MemoryBackend) -> MCPServer[Any]:
    """The same tools added to the MCPServer itself and declared by name (Tasks.register)."""
    tasks = Tasks(store=MemoryTaskStore(backend=backend))
    mcp = sdk_reference(extensions=[tasks.extension()], lifespan=tasks.lifespan)
    tasks.register("crunch", mode="optional")
    tasks.register("boom", mode="optional")
    return mcp


def fastmcp_mounted_app(backend: MemoryBackend) -> FastMCP:
    """The same task tools on a FastMCP server mounted into the one serving tasks."""
    tasks = Tasks(store=MemoryTaskStore(backend=backend))
    mcp = FastMCP("answers")
    mcp.add_extension(tasks.fastmcp_extension())
    mcp.mount(fastmcp_parts(MemoryBackend(), with_tasks=False)[0])
    return mcp


def fastmcp_mounted_reference() -> FastMCP:
    mcp = FastMCP("answers")
    mcp.mount(fastmcp_reference())
    return mcp


APPS: list[Callable[[MemoryBackend], object]] = [
    sdk_app,
    fastmcp_app,
    sdk_registered_app,
    fastmcp_mounted_app,
]
APP_IDS = ["sdk", "fastmcp", "sdk-registered", "fastmcp-mounted"]
REFERENCES: dict[Callable[[MemoryBackend], object], Callable[[], object]] = {
    sdk_app: sdk_reference,
    fastmcp_app: fastmcp_reference,
    sdk_registered_app: sdk_reference,
    fastmcp_mounted_app: fastmcp_mounted_reference,
}


async def reference_answer(
    app: Callable[[MemoryBackend], object], name: str, arguments: dict[str, Any]
) -> types.CallToolResult:
    """What the SDK alone answers this call (a server without mcp-tasks)."""
    async with running(REFERENCES[app]()) as url, Client(url) as plain:
        return await plain.call_tool(name, arguments)


def dumped(result: types.CallToolResult) -> dict[str, Any]:
    """The result as the client reads it, without the ``_meta`` the server's wire adds to
    every answer (its serverInfo), which a task's stored result does not carry."""
    raw = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return {key: value for key, value in raw.items() if key != "_meta"}


@pytest.mark.parametrize("app", APPS, ids=APP_IDS)
@pytest.mark.parametrize("arguments", BAD_ARGUMENTS, ids=["not-int", "missing", "object"])
async def test_refused_arguments_get_the_sync_answer_and_no_task(
    app: Callable[[MemoryBackend], object], arguments: dict[str, Any]
) -> None:
    """Arguments the tool's input validation refuses answer a task call exactly as they
    answer the same call without a task (an error result), and no task is written."""
    backend = MemoryBackend()
    sync = await reference_answer(app, "crunch", arguments)
    async with running(app(backend)) as url:
        async with Client(url) as plain:
            assert dumped(await plain.call_tool("crunch", arguments)) == dumped(sync)
        async with tasks_client(url) as client:
            as_task = await start_tool(client, "crunch", arguments)
    assert sync.is_error, "the SDK itself refuses these arguments"
    assert not isinstance(as_task, TaskHandle), "refused arguments must not become a task"
    assert dumped(as_task) == dumped(sync)
    assert backend.tasks == {}, "no task row is written"


@pytest.mark.parametrize("app", APPS, ids=APP_IDS)
async def test_arguments_the_sdk_coerces_still_make_a_task(
    app: Callable[[MemoryBackend], object],
) -> None:
    """The check is the SDK's own: what it accepts (a numeric string for an int, lax mode)
    still becomes a task and completes with the tool's result."""
    backend = MemoryBackend()
    async with running(app(backend)) as url, tasks_client(url) as client:
        handle = await start_tool(client, "crunch", {"steps": "7"})
        assert isinstance(handle, TaskHandle)
        state = await handle.wait()
    assert state.status == "completed"
    assert dumped(state.call_tool_result())["content"][0]["text"] == "crunched 7"
    assert len(backend.tasks) == 1


@pytest.mark.parametrize("app", APPS, ids=APP_IDS)
async def test_a_tool_error_reads_in_the_task_as_without_one(
    app: Callable[[MemoryBackend], object],
) -> None:
    """A tool raising ValueError: the task completes with the error result the same
    synchronous call answers (the SDK's own wording, whatever it shows of the message)."""
    backend = MemoryBackend()
    sync = await reference_answer(app, "boom", {})
    async with running(app(backend)) as url:
        async with Client(url) as plain:
            assert dumped(await plain.call_tool("boom", {})) == dumped(sync)
        async with tasks_client(url) as client:
            handle = await start_tool(client, "boom", {})
            assert isinstance(handle, TaskHandle)
            state = await handle.wait()
    assert sync.is_error
    assert state.status == "completed"
    assert dumped(state.call_tool_result()) == dumped(sync)


async def test_a_tool_error_reads_the_same_when_the_task_runs_again() -> None:
    """The official SDK's executor (a task run again after a crash or for a retry) answers a
    tool's error as the server's own tools/call does."""
    sync = await reference_answer(sdk_app, "boom", {})
    mcp = sdk_app(MemoryBackend())
    again = await mcpserver_tool_call(mcp, "boom")({})
    assert isinstance(again, types.CallToolResult)
    assert dumped(again) == dumped(sync)


async def test_a_fastmcp_tool_error_reads_the_same_when_the_task_runs_again() -> None:
    """FastMCP's executor (a task run again after a crash or for a retry, outside any
    request) ends the task with the error result the server's own tools/call answers."""
    sync = await reference_answer(fastmcp_app, "boom", {})
    mcp, tasks = fastmcp_parts(MemoryBackend())
    async with running(mcp):
        execute = await tasks.runner.executor_for("boom")
        assert execute is not None
        # The executor reads only the task's arguments from its context.
        change = await execute(cast("RunningTaskContext", SimpleNamespace(arguments={})))
    assert isinstance(change, Complete)
    # A task keeps the result without its wire envelope (resultType), as any task result.
    assert change.result == {k: v for k, v in dumped(sync).items() if k != "resultType"}


def lowlevel_server(tasks: Tasks | None) -> Server[Any]:
    """A low-level Server whose tools/call handler checks ``steps`` itself (the SDK checks
    no tool's arguments there); with ``tasks``, installed as a task tool."""

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        steps = (params.arguments or {}).get("steps")
        if not isinstance(steps, int):
            text = "steps must be an integer"
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=text)], is_error=True
            )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"crunched {steps}")]
        )

    lifespan = {"lifespan": tasks.lifespan} if tasks is not None else {}
    server: Server[Any] = Server("answers", on_call_tool=call_tool, **lifespan)
    if tasks is not None:
        tasks.register("crunch", mode="optional")
        tasks.install(server)
    return server


class Crunch(FastMCPTool):
    """A FastMCP tool that is no function: it checks its arguments as it runs."""

    async def run(self, arguments: dict[str, Any]) -> ToolResult:
        steps = arguments.get("steps")
        if not isinstance(steps, int):
            raise ValueError("steps must be an integer")
        return ToolResult(content=f"crunched {steps}")


def fastmcp_tool_subclass_server(tasks: Tasks | None) -> FastMCP:
    mcp = FastMCP("answers")
    crunch = Crunch(name="crunch", parameters={"type": "object", "properties": {}})
    if tasks is not None:
        mcp.add_extension(tasks.fastmcp_extension())
        crunch.task_config = TaskConfig(mode="optional")
    mcp.add_tool(crunch)
    return mcp


@pytest.mark.parametrize(
    "build", [lowlevel_server, fastmcp_tool_subclass_server], ids=["lowlevel", "fastmcp-tool"]
)
async def test_where_the_sdk_checks_nothing_first_the_task_ends_as_the_call_answers(
    build: Callable[[Tasks | None], object],
) -> None:
    """A low-level Server validates no tool arguments and a FastMCP Tool that is no
    function validates as it runs: the task call becomes a task, as the synchronous call
    runs the tool, and the task ends with exactly the answer that call gets."""
    async with running(build(None)) as url, Client(url) as plain:
        sync = await plain.call_tool("crunch", {"steps": "abc"})
    assert sync.is_error
    backend = MemoryBackend()
    app = build(Tasks(store=MemoryTaskStore(backend=backend)))
    async with running(app) as url, tasks_client(url) as client:
        handle = await start_tool(client, "crunch", {"steps": "abc"})
        assert isinstance(handle, TaskHandle)
        state = await handle.wait()
    assert state.status == "completed"
    assert dumped(state.call_tool_result()) == dumped(sync)
    assert len(backend.tasks) == 1


def strict_child_app(backend: MemoryBackend) -> FastMCP:
    """A lax server serving tasks, mounting a strict one (`strict_input_validation`)."""
    tasks = Tasks(store=MemoryTaskStore(backend=backend))
    mcp = FastMCP("answers")
    mcp.add_extension(tasks.fastmcp_extension())
    child = fastmcp_parts(MemoryBackend(), with_tasks=False)[0]
    child.strict_input_validation = True
    mcp.mount(child)
    return mcp


async def test_a_mounted_servers_own_strictness_decides() -> None:
    """A mounted server validates its tool's arguments by its own strictness: a numeric
    string for an int, which its strict validation refuses, gets its synchronous answer
    and no task, though the server serving tasks is lax."""
    strict_reference = fastmcp_reference()
    strict_reference.strict_input_validation = True
    reference = FastMCP("answers")
    reference.mount(strict_reference)
    async with running(reference) as url, Client(url) as plain:
        sync = await plain.call_tool("crunch", {"steps": "7"})
    assert sync.is_error, "the strict server refuses a numeric string"
    backend = MemoryBackend()
    async with running(strict_child_app(backend)) as url, tasks_client(url) as client:
        as_task = await start_tool(client, "crunch", {"steps": "7"})
    assert not isinstance(as_task, TaskHandle)
    assert dumped(as_task) == dumped(sync)
    assert backend.tasks == {}
