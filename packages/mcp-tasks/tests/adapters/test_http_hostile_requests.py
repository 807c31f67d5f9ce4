"""Malformed and edge requests over real HTTP: each gets the wire reference's JSON-RPC error
and HTTP status (§6), echoes no task id, and writes nothing."""

from __future__ import annotations

import base64
import json
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import httpx2 as httpx
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks import MemoryBackend, MemoryTaskStore, TaskContext, Tasks
from mcp_tasks.adapters.fast_path import TasksFastPath
from mcp_tasks.testing import PROTOCOL, WITH_TASKS, RawClient, decode, running_asgi

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

pytestmark = pytest.mark.anyio

TASKS_CAPS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
NOT_FOUND = {"code": -32602, "message": "Failed to retrieve task: Task not found"}
MISSING_CAPABILITY = {
    "code": -32021,
    "message": ("Missing required client capability: the io.modelcontextprotocol/tasks extension"),
    "data": {"requiredCapabilities": TASKS_CAPS},
}


@pytest.fixture(autouse=True, params=["sdk-path", "fast-path"])
def http_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs against the SDK's app, and against it behind the tasks/* fast path."""
    if request.param == "fast-path":
        monkeypatch.setattr(f"{__name__}.served", behind_fast_path)


def served(app: Any) -> Any:
    """The app the tests serve: the SDK's own (``http_path`` swaps in the fast path)."""
    return app


def behind_fast_path(app: Any) -> Any:
    fast = TasksFastPath(app)
    assert fast.active
    return fast


def build_server(tasks: Tasks) -> MCPServer[Any]:
    mcp: MCPServer[Any] = MCPServer(
        "hostile", extensions=[tasks.extension()], lifespan=tasks.lifespan
    )

    @tasks.tool(mcp, mode="required")
    async def ask(ctx: TaskContext) -> str:
        answer = await ctx.elicit("name", "Name?")
        return json.dumps(answer, sort_keys=True)

    @tasks.tool(mcp, mode="optional")
    async def echo(text: str) -> str:
        return text

    def raising_policy(arguments: Any, request: Any) -> str:
        raise RuntimeError("policy internals")

    @tasks.tool(mcp, mode=raising_policy)
    async def picky() -> str:
        return "never"

    @tasks.tool(mcp, mode=lambda arguments, request: "sometimes")
    async def confused() -> str:
        return "never"

    @mcp.tool()
    async def plain() -> str:
        return "plain"

    return mcp


@asynccontextmanager
async def running() -> AsyncIterator[tuple[RawClient, MemoryBackend]]:
    backend = MemoryBackend()
    tasks = Tasks(store=MemoryTaskStore(backend=backend))
    app = served(build_server(tasks).streamable_http_app())
    async with running_asgi(app) as url, httpx.AsyncClient(timeout=10) as http:
        yield RawClient(http, url), backend


async def wait_status(client: RawClient, task_id: str, status: str) -> dict[str, Any]:
    """Poll ``tasks/get`` until the task is in ``status`` (10 s failure timeout)."""
    with anyio.fail_after(10):
        while True:
            got: dict[str, Any] = (await client.call("tasks/get", {"taskId": task_id}))["result"]
            if got["status"] == status:
                return got
            await anyio.sleep(0.02)


async def parked_task(client: RawClient) -> dict[str, Any]:
    """A task of ``ask`` waiting for its one answer (``name``)."""
    task_id = (await client.call("tools/call", {"name": "ask"}))["result"]["taskId"]
    return await wait_status(client, task_id, "input_required")


def b64(value: str) -> str:
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


async def raw_post(client: RawClient, body: Any, method: str, name: str) -> httpx.Response:
    """A body the RawClient would not build (params not an object, no ``_meta``)."""
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": PROTOCOL,
        "mcp-method": method,
        "mcp-name": name,
    }
    return await client.http.post(client.url, content=json.dumps(body), headers=headers)


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_malformed_tasks_requests(method: str) -> None:
    """Each malformed tasks/* request answers its gate's code and HTTP status, in the gate
    order capability → header → params → lookup; none names the id, none changes the task."""
    async with running() as (client, backend):
        task = await parked_task(client)
        task_id = task["taskId"]
        before = backend.tasks[task_id]
        extra = {"inputResponses": {}} if method == "tasks/update" else {}
        cases: list[tuple[str, dict[str, Any], dict[str, Any], int, dict[str, Any]]] = [
            # (what, params, post() keywords, HTTP status, error)
            (
                "undeclared",
                {"taskId": task_id, **extra},
                {"capabilities": {}},
                400,
                MISSING_CAPABILITY,
            ),
            (
                "undeclared, bad params",
                {"taskId": 7},
                {"capabilities": {}},
                400,
                MISSING_CAPABILITY,
            ),
            (
                "undeclared, wrong Mcp-Name",
                {"taskId": task_id},
                {"capabilities": {}, "name": "other"},
                400,
                MISSING_CAPABILITY,
            ),
            # A missing Mcp-Name is accepted (require_name_header=False, the default).
            (
                "no taskId, no Mcp-Name",
                dict(extra),
                {},
                400,
                {"code": -32602, "message": "Missing taskId"},
            ),
            (
                "no taskId",
                dict(extra),
                {"name": "x"},
                400,
                {"code": -32602, "message": "Missing taskId"},
            ),
            (
                "taskId 7",
                {"taskId": 7, **extra},
                {"name": "7"},
                400,
                {"code": -32602, "message": "Missing taskId"},
            ),
            (
                "taskId null",
                {"taskId": None, **extra},
                {"name": "x"},
                400,
                {"code": -32602, "message": "Missing taskId"},
            ),
            (
                "taskId empty",
                {"taskId": "", **extra},
                {"name": ""},
                400,
                {"code": -32602, "message": "Missing taskId"},
            ),
            (
                "Mcp-Name mismatch",
                {"taskId": task_id, **extra},
                {"name": task_id[:-1]},
                400,
                {"code": -32020},
            ),
            ("Mcp-Name empty", {"taskId": task_id, **extra}, {"name": ""}, 400, {"code": -32020}),
            (
                "Mcp-Method mismatch",
                {"taskId": task_id, **extra},
                {
                    "headers": {
                        "mcp-method": "tasks/get" if method != "tasks/get" else "tasks/cancel"
                    }
                },
                400,
                {"code": -32020},
            ),
            (
                "MCP-Protocol-Version mismatch",
                {"taskId": task_id, **extra},
                {"headers": {"mcp-protocol-version": "2099-01-01"}},
                400,
                {"code": -32020},
            ),
            (
                "1 MB taskId",
                {"taskId": "a" * 1_000_000, **extra},
                {"name": "a"},
                400,
                {"code": -32020},
            ),
            ("20 kB taskId", {"taskId": "a" * 20_000, **extra}, {}, 400, NOT_FOUND),
            (
                "id + NUL, base64 name",
                {"taskId": task_id + "\x00", **extra},
                {"name": b64(task_id + "\x00")},
                400,
                NOT_FOUND,
            ),
            (
                "id + newline, base64 name",
                {"taskId": task_id + "\n", **extra},
                {"name": b64(task_id + "\n")},
                400,
                NOT_FOUND,
            ),
        ]
        for what, params, options, status, error in cases:
            reply = await client.post(method, params, **options)
            assert reply.status_code == status, what
            body = reply.json()
            assert {k: body["error"][k] for k in error} == error, what
            assert task_id not in reply.text, what
        no_meta = await raw_post(
            client,
            {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"taskId": task_id}},
            method,
            task_id,
        )
        not_object = await raw_post(
            client,
            {"jsonrpc": "2.0", "id": 2, "method": method, "params": [task_id]},
            method,
            task_id,
        )
        assert (no_meta.status_code, no_meta.json()["error"]["code"]) == (400, -32602)
        assert (not_object.status_code, not_object.json()["error"]["code"]) == (400, -32600)
        assert backend.tasks[task_id] == before


async def test_malformed_input_responses() -> None:
    """inputResponses missing or not an object: -32602. A non-object answer to the outstanding
    key, or one holding a lone surrogate: -32602. A non-object under a key never asked: acked,
    unread. None changes the task,
    and a well-formed answer still completes it afterwards."""
    async with running() as (client, backend):
        task_id = (await parked_task(client))["taskId"]
        before = backend.tasks[task_id]
        for responses, status, error in [
            (None, 400, {"code": -32602, "message": "Missing inputResponses"}),
            ([{"action": "accept"}], 400, {"code": -32602, "message": "Missing inputResponses"}),
            ("accept", 400, {"code": -32602, "message": "Missing inputResponses"}),
            (
                {"name": "Luca"},
                400,
                {
                    "code": -32602,
                    "message": "Each answer in inputResponses must be a result object",
                },
            ),
            (
                {"name": ["accept"], "other": {"action": "accept"}},
                400,
                {
                    "code": -32602,
                    "message": "Each answer in inputResponses must be a result object",
                },
            ),
            (
                {"name": {"action": "accept", "content": {"name": "\ud800"}}},
                400,
                {"code": -32602, "message": "inputResponses must be JSON"},
            ),
        ]:
            params: dict[str, Any] = {"taskId": task_id}
            if responses is not None:
                params["inputResponses"] = responses
            reply = await client.post("tasks/update", params)
            assert reply.status_code == status
            assert reply.json()["error"] == error
        ack = await client.call(
            "tasks/update", {"taskId": task_id, "inputResponses": {"never-asked": 5}}
        )
        assert ack["result"]["resultType"] == "complete"
        assert backend.tasks[task_id] == before

        answer = {"action": "accept", "content": {"name": "Luca"}}
        await client.call("tasks/update", {"taskId": task_id, "inputResponses": {"name": answer}})
        done = await wait_status(client, task_id, "completed")
        assert json.loads(done["result"]["content"][0]["text"]) == answer


async def test_tools_call_edges() -> None:
    """Unknown tool: the SDK's error result. A required task tool without the extension: 400
    -32021 with data.requiredCapabilities. A raising or nonsensical policy: -32603 naming no
    internals. Arguments a store cannot keep: 400 -32602. The legacy ``params.task`` hint is
    ignored. None of these creates a task."""
    async with running() as (client, backend):
        unknown = await client.post("tools/call", {"name": "nope"})
        assert unknown.status_code == 200
        assert unknown.json()["result"]["isError"] is True

        required = await client.post(
            "tools/call", {"name": "ask"}, capabilities={"elicitation": {}}
        )
        assert (required.status_code, required.json()["error"]) == (400, MISSING_CAPABILITY)

        for tool in ("picky", "confused"):
            reply = await client.post("tools/call", {"name": tool})
            assert reply.json()["error"] == {"code": -32603, "message": "Internal server error"}

        meta = json.dumps(
            {
                "io.modelcontextprotocol/protocolVersion": PROTOCOL,
                "io.modelcontextprotocol/clientCapabilities": WITH_TASKS,
            }
        )
        deep: dict[str, Any] = {}
        node = deep
        for _ in range(100):
            node["x"] = {}
            node = node["x"]
        for arguments in (
            '{"text": NaN}',
            '{"text": "a", "n": 1' + "0" * 30 + "}",
            '{"text": "\\ud800"}',
            json.dumps({"text": "a", "deep": deep}),
        ):
            text = (
                '{"jsonrpc":"2.0","id":1,"method":"tools/call",'
                '"params":{"name":"echo","arguments":%s,"_meta":%s}}'
            )
            headers = {
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
                "mcp-protocol-version": PROTOCOL,
                "mcp-method": "tools/call",
                "mcp-name": "echo",
            }
            reply = await client.http.post(
                client.url, content=text % (arguments, meta), headers=headers
            )
            assert (reply.status_code, reply.json()["error"]) == (
                400,
                {"code": -32602, "message": "Tool arguments are not JSON-safe"},
            )
        not_object = await client.post("tools/call", {"name": "echo", "arguments": ["a"]})
        assert (not_object.status_code, not_object.json()["error"]["code"]) == (400, -32602)

        hinted_plain = await client.call("tools/call", {"name": "plain", "task": {"ttl": 1000}})
        hinted_sync = await client.call(
            "tools/call",
            {"name": "echo", "arguments": {"text": "s"}, "task": {"ttl": 1}},
            capabilities={},
        )
        assert "taskId" not in hinted_plain["result"]
        assert hinted_sync["result"]["content"] == [{"type": "text", "text": "s"}]
        assert backend.tasks == {}

        hinted_task = await client.call(
            "tools/call", {"name": "echo", "arguments": {"text": "t"}, "task": {"ttl": 1}}
        )
        assert hinted_task["result"]["resultType"] == "task"
        assert hinted_task["result"]["ttlMs"] == 3_600_000  # the hint's ttl is not used


async def test_removed_and_unknown_tasks_methods_are_404() -> None:
    """tasks/list, tasks/result and any other tasks/* method: 404 with -32601, declared or not."""
    async with running() as (client, _):
        for method in ("tasks/list", "tasks/result", "tasks/delete", "tasks/listen", "tasks/"):
            for capabilities in (None, {}):
                reply = await client.post(method, {"taskId": "t"}, capabilities=capabilities)
                assert (reply.status_code, reply.json()["error"]["code"]) == (404, -32601), method


async def test_legacy_era_tasks_methods_do_not_exist() -> None:
    """On a 2025-11-25 session every tasks/* method is -32601, even with the extension declared."""
    async with running() as (client, backend):
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
                    "capabilities": {"extensions": TASKS_CAPS["extensions"]},
                    "clientInfo": {"name": "legacy", "version": "1"},
                },
            },
        )
        session = {
            **headers,
            "mcp-protocol-version": "2025-11-25",
            "mcp-session-id": init.headers["mcp-session-id"],
        }
        await client.http.post(
            client.url,
            headers=session,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        )
        for number, method in enumerate(
            ("tasks/get", "tasks/update", "tasks/cancel", "tasks/list"), start=2
        ):
            params = {"taskId": "t", "inputResponses": {}}
            reply = decode(
                await client.http.post(
                    client.url,
                    headers=session,
                    json={"jsonrpc": "2.0", "id": number, "method": method, "params": params},
                )
            )
            assert reply["error"]["code"] == -32601, method
        assert backend.tasks == {}


async def test_a_duplicated_mcp_name_is_a_header_error() -> None:
    """Two Mcp-Name headers (one matching) are -32020: readers of the first and of the last
    copy would disagree (the SDK's rung, relied on for tasks/* too)."""
    async with running() as (client, _):
        task_id = (await parked_task(client))["taskId"]
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tasks/get",
            "params": {
                "taskId": task_id,
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": PROTOCOL,
                    "io.modelcontextprotocol/clientCapabilities": WITH_TASKS,
                },
            },
        }
        for names in ((task_id, "other"), ("other", task_id)):
            headers = [
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("mcp-protocol-version", PROTOCOL),
                ("mcp-method", "tasks/get"),
                *(("mcp-name", name) for name in names),
            ]
            reply = await client.http.post(client.url, content=json.dumps(body), headers=headers)
            assert (reply.status_code, reply.json()["error"]["code"]) == (400, -32020)
            assert task_id not in reply.text
