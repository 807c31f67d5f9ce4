"""End to end over real HTTP: uvicorn on a socket, the SDK's Streamable HTTP app, raw JSON-RPC."""

from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import httpx2 as httpx
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks import ManualClock, MemoryTaskStore, ServingOptions, StoreOptions, TaskContext, Tasks
from mcp_tasks.testing import RawClient, decode, running_asgi, static_auth

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

pytestmark = pytest.mark.anyio

NOT_FOUND = {"code": -32602, "message": "Failed to retrieve task: Task not found"}


@dataclass
class Probe:
    """What the task bodies let the test observe."""

    started: anyio.Event = field(default_factory=anyio.Event)
    stopped: anyio.Event = field(default_factory=anyio.Event)
    #: What happened, in order: the body and the test both append.
    events: list[str] = field(default_factory=list)


def build_server(tasks: Tasks, probe: Probe, *, auth: bool = False) -> MCPServer[Any]:
    extra: dict[str, Any] = {}
    if auth:
        extra = static_auth("alice", "bob")
    mcp: MCPServer[Any] = MCPServer(
        "e2e", extensions=[tasks.extension()], lifespan=tasks.lifespan, **extra
    )

    @tasks.tool(mcp, mode="optional")
    async def echo(text: str, ctx: TaskContext) -> str:
        await ctx.progress(1, 1, "echoing")
        return text

    @tasks.tool(mcp, mode="required")
    async def two_questions(ctx: TaskContext) -> str:
        schema = {"type": "object", "properties": {"v": {"type": "string"}}}
        answers = await ctx.request_input(
            {
                key: {
                    "method": "elicitation/create",
                    "params": {"mode": "form", "message": key, "requestedSchema": schema},
                }
                for key in ("a", "b")
            }
        )
        return " ".join(str(answers[k]["content"]["v"]) for k in ("a", "b"))  # type: ignore[index,call-overload]

    @tasks.tool(mcp, mode="required")
    async def forever() -> str:
        probe.events.append("body started")
        probe.started.set()
        try:
            await anyio.sleep_forever()
        finally:
            probe.events.append("body stopped")
            probe.stopped.set()
        return "unreachable"

    return mcp


@asynccontextmanager
async def running(
    tasks: Tasks, *, auth: bool = False, token: str | None = None
) -> AsyncIterator[tuple[RawClient, Probe]]:
    probe = Probe()
    app = build_server(tasks, probe, auth=auth).streamable_http_app()
    async with running_asgi(app) as url, httpx.AsyncClient(timeout=10) as http:
        yield RawClient(http, url, token=token), probe


async def wait_status(client: RawClient, task_id: str, *wanted: str) -> dict[str, Any]:
    """Poll ``tasks/get`` until the task reaches one of ``wanted`` (10 s failure timeout)."""
    with anyio.fail_after(10):
        while True:
            result: dict[str, Any] = (await client.call("tasks/get", {"taskId": task_id}))["result"]
            if result["status"] in wanted:
                return result
            await anyio.sleep(0.05)


async def test_create_then_poll_to_completion() -> None:
    """A declared call answers a task at once; polling reaches completed with the tool result."""
    async with running(Tasks()) as (client, _):
        created = (await client.call("tools/call", {"name": "echo", "arguments": {"text": "hi"}}))[
            "result"
        ]
        assert created["resultType"] == "task"
        assert created["status"] == "working"
        assert {"result", "error", "inputRequests", "requestState"}.isdisjoint(created)
        done = await wait_status(client, created["taskId"], "completed")
        assert done["resultType"] == "complete"
        assert done["result"]["content"] == [{"type": "text", "text": "hi"}]
        assert done["result"]["isError"] is False
        assert done["statusMessage"] == "echoing (1/1)"


async def test_undeclared_call_runs_synchronously() -> None:
    """Without the extension an optional tool answers its plain result, no task."""
    async with running(Tasks()) as (client, _):
        reply = await client.call(
            "tools/call", {"name": "echo", "arguments": {"text": "sync"}}, capabilities={}
        )
        assert reply["result"]["resultType"] == "complete"
        assert reply["result"]["content"] == [{"type": "text", "text": "sync"}]
        assert "taskId" not in reply["result"]


async def test_partial_then_full_input_round() -> None:
    """A partial tasks/update leaves only the unanswered key; the last answer resumes the body."""
    async with running(Tasks()) as (client, _):
        created = (await client.call("tools/call", {"name": "two_questions"}))["result"]
        task_id = created["taskId"]
        parked = await wait_status(client, task_id, "input_required")
        assert sorted(parked["inputRequests"]) == ["a", "b"]

        ack = await client.call(
            "tasks/update",
            {
                "taskId": task_id,
                "inputResponses": {"a": {"action": "accept", "content": {"v": "x"}}},
            },
        )
        assert ack["result"] == {"resultType": "complete", "_meta": ack["result"]["_meta"]}
        partial = (await client.call("tasks/get", {"taskId": task_id}))["result"]
        assert partial["status"] == "input_required"
        assert list(partial["inputRequests"]) == ["b"]

        await client.call(
            "tasks/update",
            {
                "taskId": task_id,
                "inputResponses": {"b": {"action": "accept", "content": {"v": "y"}}},
            },
        )
        done = await wait_status(client, task_id, "completed")
        assert done["result"]["content"][0]["text"] == "x y"


async def test_cancel_stops_the_body() -> None:
    """tasks/cancel acks empty, the task is cancelled, and the body stops because of it:
    after the cancel was sent and while the server still serves (not at shutdown).
    How fast is measured by bench/cancel_latency.py (`nox -s bench`), not here."""
    async with running(Tasks()) as (client, probe):
        created = (await client.call("tools/call", {"name": "forever"}))["result"]
        with anyio.fail_after(10):  # failure timeouts only
            await probe.started.wait()
        probe.events.append("cancel sent")
        ack = await client.call("tasks/cancel", {"taskId": created["taskId"]})
        with anyio.fail_after(10):
            await probe.stopped.wait()
        final = (await client.call("tasks/get", {"taskId": created["taskId"]}))["result"]
    assert set(ack["result"]) == {"resultType", "_meta"}
    assert final["status"] == "cancelled"
    assert probe.events == ["body started", "cancel sent", "body stopped"]


async def test_ttl_expiry_answers_not_found() -> None:
    """Once its TTL has passed a task answers -32602, exactly like an unknown id."""
    clock = ManualClock()
    tasks = Tasks(store=MemoryTaskStore(clock=clock), serving=ServingOptions(default_ttl_ms=60_000))
    async with running(tasks) as (client, _):
        created = (await client.call("tools/call", {"name": "echo", "arguments": {"text": "t"}}))[
            "result"
        ]
        assert created["ttlMs"] == 60_000
        done = await wait_status(client, created["taskId"], "completed")
        # Created at this clock's one instant; the end may have grown ttlMs (S-TTL.2).
        clock.advance(done["ttlMs"] + 1)
        expired = await client.post("tasks/get", {"taskId": created["taskId"]}, request_id=7)
        unknown = await client.post("tasks/get", {"taskId": "x" * 43}, request_id=7)
        assert expired.json()["error"] == NOT_FOUND
        assert (expired.status_code, expired.content) == (unknown.status_code, unknown.content)


async def test_row_cap_answers_task_limit_reached() -> None:
    """With the store at its row cap a task-creating call answers -32603 "Task limit reached"."""
    tasks = Tasks(store=MemoryTaskStore(StoreOptions(max_rows=1)))
    async with running(tasks) as (client, _probe):
        first = await client.call("tools/call", {"name": "forever"})
        assert first["result"]["resultType"] == "task"
        second = await client.call("tools/call", {"name": "forever"})
        assert second["error"] == {"code": -32603, "message": "Task limit reached"}


def same_answer(a: httpx.Response, b: httpx.Response) -> bool:
    """Equal status, headers (all but ``date``, which is the clock) and body bytes."""

    def headers(response: httpx.Response) -> list[tuple[str, str]]:
        return sorted((k, v) for k, v in response.headers.multi_items() if k != "date")

    return (a.status_code, headers(a), a.content) == (b.status_code, headers(b), b.content)


async def test_foreign_task_answers_like_a_missing_one() -> None:
    """Another principal's task id gets the same status, headers and bytes as an id that
    never existed, on get, update (even answering its outstanding keys) and cancel; the
    foreign task is left exactly as it was."""
    tasks = Tasks()
    async with running(tasks, auth=True, token="alice") as (alice, _):
        working = (await alice.call("tools/call", {"name": "forever"}))["result"]["taskId"]
        parked = (await alice.call("tools/call", {"name": "two_questions"}))["result"]["taskId"]
        before = await wait_status(alice, parked, "input_required")
        answers = {k: {"action": "accept", "content": {"v": k}} for k in ("a", "b")}
        bob = RawClient(alice.http, alice.url, token="bob")
        for task_id in (working, parked):
            for method, extra in (
                ("tasks/get", {}),
                ("tasks/update", {"inputResponses": answers}),
                ("tasks/cancel", {}),
            ):
                foreign = await bob.post(method, {"taskId": task_id, **extra}, request_id=9)
                missing = await bob.post(method, {"taskId": "y" * 43, **extra}, request_id=9)
                assert foreign.json()["error"] == NOT_FOUND
                assert same_answer(foreign, missing), method
        still = (await alice.call("tasks/get", {"taskId": working}))["result"]
        assert still["status"] == "working"
        after = (await alice.call("tasks/get", {"taskId": parked}))["result"]
        assert (after["status"], after["lastUpdatedAt"], after["inputRequests"]) == (
            "input_required",
            before["lastUpdatedAt"],
            before["inputRequests"],
        )


async def test_http_statuses_of_the_gates() -> None:
    """-32021 and -32020 answer HTTP 400, tasks/list and tasks/result 404 with -32601."""
    async with running(Tasks()) as (client, _):
        undeclared = await client.post("tasks/get", {"taskId": "t"}, capabilities={})
        mismatched = await client.post("tasks/get", {"taskId": "t"}, name="other")
        missing_name = await client.post("tasks/cancel", {"taskId": "t"}, headers={"mcp-name": ""})
        listed = await client.post("tasks/list", {})
        result = await client.post("tasks/result", {"taskId": "t"})
    assert (undeclared.status_code, undeclared.json()["error"]["code"]) == (400, -32021)
    assert (mismatched.status_code, mismatched.json()["error"]["code"]) == (400, -32020)
    assert missing_name.json()["error"]["code"] == -32020
    assert (listed.status_code, listed.json()["error"]["code"]) == (404, -32601)
    assert (result.status_code, result.json()["error"]["code"]) == (404, -32601)


async def test_a_legacy_era_request_never_gets_a_task() -> None:
    """On a 2025-11-25 session (initialize handshake) a task tool runs synchronously even
    though the client declared the extension, and tasks/get does not exist."""
    async with running(Tasks()) as (client, _):
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
        }
        init = await client.http.post(
            client.url,
            headers=headers,
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
                    "clientInfo": {"name": "legacy", "version": "1"},
                },
            },
        )
        session = {**headers, "mcp-protocol-version": "2025-11-25"}
        session["mcp-session-id"] = init.headers["mcp-session-id"]
        await client.http.post(
            client.url,
            headers=session,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        )
        call = decode(
            await client.http.post(
                client.url,
                headers=session,
                json={
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": "old"}},
                },
            )
        )
        get = decode(
            await client.http.post(
                client.url,
                headers=session,
                json={"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"taskId": "t"}},
            )
        )
    assert call["result"]["content"] == [{"type": "text", "text": "old"}]
    assert "taskId" not in call["result"]
    assert get["error"]["code"] == -32601
