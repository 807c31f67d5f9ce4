"""A synchronous call that asks for input answers an InputRequiredResult (multi-round-trip
requests, 2026-07-28), for forbidden tools and for optional tools called without the
extension alike; the retry that carries the answers runs the tool to its result."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import httpx2 as httpx
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks import TaskContext, Tasks
from mcp_tasks.testing import RawClient, running_asgi

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

pytestmark = pytest.mark.anyio

TASKS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
SCHEMA = {"type": "object", "properties": {"v": {"type": "string"}}}
ASK = {
    "method": "elicitation/create",
    "params": {"mode": "form", "message": "Name?", "requestedSchema": SCHEMA},
}
NAME = {"action": "accept", "content": {"v": "Alice"}}


def build(tasks: Tasks, runs: list[str]) -> MCPServer[Any]:
    mcp: MCPServer[Any] = MCPServer("sync", extensions=[tasks.extension()], lifespan=tasks.lifespan)

    @tasks.tool(mcp, mode="forbidden")
    async def greet_now(ctx: TaskContext) -> str:
        runs.append("greet_now")
        answer = await ctx.elicit("name", "Name?", SCHEMA)
        return f"Hello, {answer['content']['v']}!"  # type: ignore[index,call-overload]

    @tasks.tool(mcp, mode="optional")
    async def greet(ctx: TaskContext) -> str:
        runs.append("greet")
        answer = await ctx.elicit("name", "Name?", SCHEMA)
        return f"Hello, {answer['content']['v']}!"  # type: ignore[index,call-overload]

    @tasks.tool(mcp, mode="forbidden")
    async def login(ctx: TaskContext) -> str:
        await ctx.request_input(
            {
                "sso": {
                    "method": "elicitation/create",
                    "params": {
                        "mode": "url",
                        "message": "Sign in",
                        "url": "https://login.example",
                        "elicitationId": "sso-1",
                    },
                }
            }
        )
        return "signed in"

    return mcp


@asynccontextmanager
async def serving() -> AsyncIterator[tuple[RawClient, list[str]]]:
    runs: list[str] = []
    app = build(Tasks(), runs).streamable_http_app()
    async with running_asgi(app) as url, httpx.AsyncClient(timeout=10) as http:
        yield RawClient(http, url), runs


@pytest.mark.parametrize(
    ("tool", "capabilities"),
    [
        ("greet_now", {**TASKS, "elicitation": {}}),  # forbidden, extension declared
        ("greet_now", {"elicitation": {}}),  # forbidden, not declared
        ("greet", {"elicitation": {}}),  # optional, not declared
    ],
)
async def test_input_in_a_synchronous_call_is_a_multi_round_trip(
    tool: str, capabilities: dict[str, Any]
) -> None:
    """Round 1 answers ``input_required`` with the question (no task, no -32021); round 2,
    carrying ``inputResponses``, answers the tool's result."""
    async with serving() as (raw, runs):
        first = await raw.call("tools/call", {"name": tool}, capabilities=capabilities)
        second = await raw.call(
            "tools/call",
            {"name": tool, "inputResponses": {"name": NAME}},
            capabilities=capabilities,
        )
    assert first["result"]["resultType"] == "input_required"
    assert first["result"]["inputRequests"] == {"name": ASK}
    assert "taskId" not in first["result"]
    assert second["result"]["resultType"] == "complete"
    assert second["result"]["content"] == [{"type": "text", "text": "Hello, Alice!"}]
    assert runs == [tool, tool]


async def test_a_synchronous_call_without_the_capability_is_told_which() -> None:
    """A synchronous call asking for elicitation of a client without it: -32021 naming
    ``elicitation`` (what the client can act on), never the tasks extension."""
    async with serving() as (raw, _):
        reply = await raw.call("tools/call", {"name": "greet_now"}, capabilities=TASKS)
    assert reply["error"] == {
        "code": -32021,
        "message": "Missing required client capability: elicitation",
        "data": {"requiredCapabilities": {"elicitation": {}}},
    }


async def test_a_synchronous_url_elicitation_needs_elicitation_url() -> None:
    """URL mode needs ``elicitation.url``: with only form declared it is refused, with url
    declared it is asked."""
    async with serving() as (raw, _):
        refused = await raw.call("tools/call", {"name": "login"}, capabilities={"elicitation": {}})
        asked = await raw.call(
            "tools/call", {"name": "login"}, capabilities={"elicitation": {"url": {}}}
        )
    assert refused["error"]["code"] == -32021
    assert refused["error"]["data"] == {"requiredCapabilities": {"elicitation": {"url": {}}}}
    assert asked["result"]["resultType"] == "input_required"
    assert json.dumps(asked["result"]["inputRequests"]["sso"]["params"]["mode"]) == '"url"'
