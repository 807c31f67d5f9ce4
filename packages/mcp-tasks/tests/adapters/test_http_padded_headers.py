"""Routing headers with optional whitespace around their values (RFC 9110 §5.5: a field
value excludes it) are the values themselves, under either HTTP parser uvicorn runs: h11
strips the whitespace, httptools hands it on, and ``Tasks.http_app`` strips it then.

The requests are written by hand on a socket: httpx's h11 refuses to send such a value,
which clients of other stacks (Node's, the conformance runner's) send."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks import MemoryTaskStore, Tasks
from mcp_tasks.testing import PROTOCOL, WITH_TASKS, running_asgi

pytestmark = pytest.mark.anyio


async def post(
    url: str, method: str, params: dict[str, Any], name: str, routed_method: str
) -> tuple[int, Any]:
    """One JSON-RPC request, its ``Mcp-Method`` and ``Mcp-Name`` values sent as given;
    the answer's status and JSON body."""
    params = {
        **params,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL,
            "io.modelcontextprotocol/clientCapabilities": WITH_TASKS,
        },
    }
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    where = urlsplit(url)
    head = (
        f"POST {where.path} HTTP/1.1\r\n"
        f"Host: {where.netloc}\r\n"
        "Content-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\n"
        f"Mcp-Protocol-Version: {PROTOCOL}\r\n"
        f"Mcp-Method: {routed_method}\r\n"
        f"Mcp-Name: {name}\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    async with await anyio.connect_tcp(where.hostname or "", where.port or 80) as stream:
        await stream.send(head.encode() + body)
        answer = b""
        while True:
            try:
                answer += await stream.receive()
            except anyio.EndOfStream:
                break
    status_line, _, rest = answer.partition(b"\r\n")
    headers, _, payload = rest.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" in headers.lower():
        payload = unchunked(payload)
    return int(status_line.split()[1]), json.loads(payload)


def unchunked(payload: bytes) -> bytes:
    out = b""
    while payload:
        size, _, payload = payload.partition(b"\r\n")
        length = int(size, 16)
        out, payload = out + payload[:length], payload[length + 2 :]
    return out


@pytest.mark.parametrize("parser", ["h11", "httptools"])
async def test_padded_routing_headers_are_their_values(parser: str) -> None:
    tasks = Tasks(store=MemoryTaskStore())
    mcp: MCPServer[Any] = MCPServer(
        "padded", extensions=[tasks.extension()], lifespan=tasks.lifespan
    )

    @tasks.tool(mcp, mode="required")
    async def greet(name: str) -> str:
        return f"Hello, {name}!"

    async with running_asgi(tasks.http_app(mcp), http=parser) as url:
        call = {"name": "greet", "arguments": {"name": "x"}}
        status, created = await post(url, "tools/call", call, "  greet  ", " tools/call\t")
        assert status == 200, created
        task_id = created["result"]["taskId"]
        status, got = await post(
            url, "tasks/get", {"taskId": task_id}, f" {task_id} ", "\ttasks/get "
        )
        assert status == 200, got
        assert got["result"]["taskId"] == task_id
        status, wrong = await post(url, "tasks/get", {"taskId": task_id}, " another ", "tasks/get")
        assert (status, wrong["error"]["code"]) == (400, -32020)
