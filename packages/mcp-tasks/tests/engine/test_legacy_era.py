"""The 2025-11-25 era: a tool that requires a task cannot run there, and says why."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import httpx2 as httpx
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent

from mcp_tasks import RequestView, TaskContext, TaskMode, Tasks
from mcp_tasks.engine import ToolOptions
from mcp_tasks.testing import decode, running_asgi

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

pytestmark = pytest.mark.anyio

LEGACY = "2025-11-25"
EXT: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
REQUIRED_MESSAGE = (
    "Tool 'deploy' requires a task, which protocol revision 2025-11-25 cannot carry; use 2026-07-28"
)


def by_argument(arguments: Mapping[str, Any], request: RequestView) -> str:
    return "required" if arguments.get("big") else "optional"


def build(tasks: Tasks) -> MCPServer[Any]:
    mcp: MCPServer[Any] = MCPServer(
        "legacy", extensions=[tasks.extension()], lifespan=tasks.lifespan
    )
    ran: list[str] = []

    @tasks.tool(mcp, mode="required")
    async def deploy(ref: str) -> str:
        ran.append("deploy")
        return f"deployed {ref}"

    @tasks.tool(mcp, mode="optional")
    async def echo(text: str) -> str:
        return text

    @tasks.tool(mcp, mode=by_argument)
    async def build_it(big: bool) -> str:
        ran.append("build_it")
        return "built"

    @tasks.tool(mcp, mode="optional")
    async def ask(ctx: TaskContext) -> str:
        answer = await ctx.elicit("name", "Name?")
        return str(answer)

    mcp.ran = ran  # type: ignore[attr-defined]
    return mcp


class LegacySession:
    """A 2025-11-25 session over real HTTP: initialize handshake, then plain JSON-RPC."""

    def __init__(self, http: httpx.AsyncClient, url: str, headers: dict[str, str]) -> None:
        self.http, self.url, self.headers = http, url, headers
        self._id = 1

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> tuple[int, Any]:
        self._id += 1
        response = await self.http.post(
            self.url,
            headers=self.headers,
            json={
                "jsonrpc": "2.0",
                "id": self._id,
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments},
            },
        )
        return response.status_code, decode(response)


@asynccontextmanager
async def legacy_session(mcp: MCPServer[Any]) -> AsyncIterator[LegacySession]:
    async with (
        running_asgi(mcp.streamable_http_app()) as url,
        httpx.AsyncClient(timeout=10) as http,
    ):
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
        }
        init = await http.post(
            url,
            headers=headers,
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": LEGACY,
                    "capabilities": EXT,
                    "clientInfo": {"name": "legacy", "version": "1"},
                },
            },
        )
        session = {**headers, "mcp-protocol-version": LEGACY}
        session["mcp-session-id"] = init.headers["mcp-session-id"]
        await http.post(
            url, headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
        )
        yield LegacySession(http, url, session)


async def test_a_required_tool_on_a_legacy_session_is_refused_naming_tool_and_revision() -> None:
    """A task-required tool on 2025-11-25 answers -32603 naming the tool and the revision, and
    never runs; -32021 (the tasks capability) is not what it answers."""
    tasks = Tasks()
    mcp = build(tasks)
    async with legacy_session(mcp) as session:
        _, reply = await session.call_tool("deploy", {"ref": "main"})
    assert reply["error"] == {"code": -32603, "message": REQUIRED_MESSAGE}
    assert mcp.ran == []  # type: ignore[attr-defined]


async def test_an_optional_tool_on_a_legacy_session_runs_synchronously() -> None:
    """An optional tool still runs synchronously there, with its plain result."""
    async with legacy_session(build(Tasks())) as session:
        _, reply = await session.call_tool("echo", {"text": "old"})
    assert reply["result"]["content"] == [{"type": "text", "text": "old"}]
    assert "taskId" not in reply["result"]


async def test_a_policy_function_decides_per_call_on_a_legacy_session() -> None:
    """A policy function is asked on the legacy era too: "required" is refused, "optional" runs."""
    tasks = Tasks()
    mcp = build(tasks)
    async with legacy_session(mcp) as session:
        _, big = await session.call_tool("build_it", {"big": True})
        _, small = await session.call_tool("build_it", {"big": False})
    assert big["error"] == {
        "code": -32603,
        "message": REQUIRED_MESSAGE.replace("'deploy'", "'build_it'"),
    }
    assert small["result"]["content"] == [{"type": "text", "text": "built"}]
    assert mcp.ran == ["build_it"]  # type: ignore[attr-defined]


async def test_engine_refuses_required_on_any_pre_tasks_revision() -> None:
    """At the engine: any revision that cannot carry the extension, declared or not."""
    tasks = Tasks()
    calls: list[int] = []

    async def call_next() -> CallToolResult:
        calls.append(1)
        return CallToolResult(content=[TextContent(type="text", text="ran")])

    async with tasks.running():
        for version in ("2025-11-25", "2025-06-18"):
            with pytest.raises(MCPError) as caught:
                await tasks.engine.handle_tool_call(
                    RequestView(protocol_version=version, client_capabilities=EXT),
                    name="deploy",
                    arguments={},
                    input_responses=None,
                    call_next=call_next,
                    options=ToolOptions(mode=TaskMode.REQUIRED),
                )
            assert caught.value.code == -32603
            assert caught.value.error.message == REQUIRED_MESSAGE.replace(LEGACY, version)
    assert calls == []


async def test_asking_for_input_on_a_legacy_session_is_a_server_error() -> None:
    """2025-11-25 has no multi-round-trip requests: a tool asking for input there answers
    -32603, not -32021 (no capability the client could declare would help)."""
    async with legacy_session(build(Tasks())) as session:
        _, reply = await session.call_tool("ask", {})
    assert reply["error"] == {
        "code": -32603,
        "message": "This call cannot ask the client for input",
    }
