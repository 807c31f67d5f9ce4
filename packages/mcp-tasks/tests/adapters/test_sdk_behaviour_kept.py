"""Installing mcp-tasks leaves the SDK's own answers as they were: the same ordinary requests
(tools, resources, prompts, completion, a synchronous input round, malformed requests), none
declaring the tasks extension, sent to one server without mcp-tasks and to the same server
with it installed as we recommend (the extension, its lifespan, a task tool beside the
others, ``tasks.http_app``), get the same status, content type and body bytes.

Two differences are by design and taken out before comparing: the task tool's own entry in
``tools/list``, and the extension the server advertises in ``server/discover``. A request
state is sealed afresh each time (a random nonce), so its value is set aside too.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2 as httpx
import mcp_types as types
import pytest
from mcp.server.mcpserver import Context, MCPServer

from mcp_tasks import TaskContext, Tasks
from mcp_tasks.stores.memory import MemoryTaskStore
from mcp_tasks.testing import PROTOCOL, TASKS, RawClient, running_asgi

pytestmark = pytest.mark.anyio

#: What an ordinary client declares: no tasks extension.
PLAIN: dict[str, Any] = {"elicitation": {}, "sampling": {}}
NAME_FORM = types.ElicitRequest(
    params=types.ElicitRequestFormParams(
        message="Your name?",
        requested_schema={"type": "object", "properties": {"name": {"type": "string"}}},
    )
)


def build(tasks: Tasks | None) -> MCPServer[Any]:
    """The same server, with mcp-tasks installed on ``tasks`` or without it."""
    if tasks is None:
        mcp: MCPServer[Any] = MCPServer("kept")
    else:
        mcp = MCPServer("kept", extensions=[tasks.extension()], lifespan=tasks.lifespan)

        @tasks.tool(mcp, mode="optional")
        async def deploy(ref: str, ctx: TaskContext) -> str:
            return f"deployed {ref}"

    @mcp.tool()
    def echo(text: str) -> str:
        """Say it back."""
        return text

    @mcp.tool()
    def broken() -> str:
        """Fail as a tool."""
        raise RuntimeError("broken on purpose")

    @mcp.tool()
    def ask(ctx: Context) -> str | types.InputRequiredResult:
        """One synchronous input round, then a greeting."""
        answer = (ctx.input_responses or {}).get("name")
        if answer is None:
            return types.InputRequiredResult(input_requests={"name": NAME_FORM}, request_state="r1")
        content = answer.content if isinstance(answer, types.ElicitResult) else None
        return f"Hello, {(content or {}).get('name')}! ({ctx.request_state})"

    @mcp.resource("test://text")
    def text() -> str:
        """A text resource."""
        return "some text"

    @mcp.resource("test://item/{item_id}")
    def item(item_id: str) -> str:
        """A templated resource."""
        return json.dumps({"id": item_id})

    @mcp.prompt()
    def greeting(name: str) -> str:
        """A prompt with an argument."""
        return f"Greet {name}."

    @mcp.completion()
    async def complete(ref: Any, argument: Any, context: Any) -> types.Completion:
        return types.Completion(values=["alpha", "beta"], total=2, has_more=False)

    return mcp


Answer = tuple[int, str, bytes]


def call(method: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
    async def send(client: RawClient) -> list[httpx.Response]:
        return [await client.post(method, params, capabilities=PLAIN, **kw)]

    return send


def raw(body: bytes, **headers: str) -> Any:
    async def send(client: RawClient) -> list[httpx.Response]:
        sent = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": PROTOCOL,
            **headers,
        }
        return [await client.http.post(client.url, content=body, headers=sent)]

    return send


async def input_round(client: RawClient) -> list[httpx.Response]:
    first = await client.post("tools/call", {"name": "ask", "arguments": {}}, capabilities=PLAIN)
    state = first.json()["result"].get("requestState")
    answer = {"action": "accept", "content": {"name": "Ada"}}
    second = await client.post(
        "tools/call",
        {"name": "ask", "arguments": {}, "inputResponses": {"name": answer}, "requestState": state},
        capabilities=PLAIN,
    )
    return [first, second]


META = {"io.modelcontextprotocol/protocolVersion": PROTOCOL}
BATCH = [{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}]
CASES: dict[str, Any] = {
    "server/discover": call("server/discover"),
    "tools/list": call("tools/list"),
    "a plain tool": call("tools/call", {"name": "echo", "arguments": {"text": "hi"}}),
    "a tool error": call("tools/call", {"name": "broken", "arguments": {}}),
    "an unknown tool": call("tools/call", {"name": "nope", "arguments": {}}),
    "bad arguments": call("tools/call", {"name": "echo", "arguments": {"text": 3}}),
    "a synchronous input round": input_round,
    "resources/list": call("resources/list"),
    "resources/templates/list": call("resources/templates/list"),
    "a resource": call("resources/read", {"uri": "test://text"}, name="test://text"),
    "a templated resource": call("resources/read", {"uri": "test://item/7"}, name="test://item/7"),
    "a missing resource": call("resources/read", {"uri": "test://none"}, name="test://none"),
    "prompts/list": call("prompts/list"),
    "a prompt": call("prompts/get", {"name": "greeting", "arguments": {"name": "Ada"}}),
    "completion": call(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "greeting"},
            "argument": {"name": "name", "value": "a"},
        },
    ),
    "an unknown method": call("no/such"),
    "a mismatched Mcp-Method": call(
        "tools/call", {"name": "echo", "arguments": {"text": "x"}}, headers={"mcp-method": "a/b"}
    ),
    "a mismatched Mcp-Name": call(
        "tools/call", {"name": "echo", "arguments": {"text": "x"}}, name="other"
    ),
    "an unsupported protocol version": call(
        "tools/list", headers={"mcp-protocol-version": "1999-01-01"}
    ),
    "not JSON": raw(b"{not json", **{"mcp-method": "tools/list"}),
    "not JSON-RPC": raw(b'{"hello": 1}'),
    "no _meta": raw(
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}',
        **{"mcp-method": "tools/list"},
    ),
    "a batch": raw(
        json.dumps(BATCH).encode(),
        **{"mcp-method": "tools/list"},
    ),
}


def normalized(case: str, body: bytes) -> bytes:
    """``body`` without what differs by design: the task tool's entry in ``tools/list``,
    the extension ``server/discover`` advertises, and a sealed request state's value."""
    if not body.startswith(b"{"):
        return body
    message = json.loads(body)
    result = message.get("result", {})
    if case == "tools/list":
        result["tools"] = [tool for tool in result["tools"] if tool["name"] != "deploy"]
    elif case == "server/discover":
        capabilities = result.get("capabilities", {})
        capabilities.get("extensions", {}).pop(TASKS, None)
        if capabilities.get("extensions") == {}:
            del capabilities["extensions"]
    elif "requestState" in result:
        result["requestState"] = "<sealed>"
    else:
        return body
    return json.dumps(message, separators=(",", ":")).encode()


async def answers(app: Any) -> dict[str, list[Answer]]:
    async with running_asgi(app) as url, httpx.AsyncClient(timeout=30) as http:
        client = RawClient(http, url)
        found = {}
        for case, send in CASES.items():
            responses = await send(client)
            found[case] = [
                (r.status_code, r.headers.get("content-type", ""), normalized(case, r.content))
                for r in responses
            ]
        return found


async def test_the_sdk_answers_the_same_with_mcp_tasks_installed() -> None:
    """Every ordinary request gets the same status, content type and body bytes from the
    server with mcp-tasks installed (fast path on) as from the same server without it."""
    without = await answers(build(None).streamable_http_app())
    tasks = Tasks(store=MemoryTaskStore())
    with_tasks = await answers(tasks.http_app(build(tasks)))
    differing = {
        case: (without[case], with_tasks[case])
        for case in CASES
        if without[case] != with_tasks[case]
    }
    assert differing == {}
    # The comparison saw real answers, not two empty or failing servers.
    assert without["a plain tool"][0][0] == 200
    assert b'"text":"hi"' in without["a plain tool"][0][2]
    assert b"Hello, Ada! (r1)" in without["a synchronous input round"][1][2]
