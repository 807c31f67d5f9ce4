"""Test support: a real HTTP server (uvicorn on a free port) and a raw JSON-RPC client."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import uvicorn

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    import httpx2 as httpx
    from starlette.types import ASGIApp

PROTOCOL = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS: dict[str, Any] = {"elicitation": {}, "extensions": {TASKS: {}}}


@asynccontextmanager
async def serve(app: ASGIApp) -> AsyncIterator[str]:
    """Serve ``app`` with uvicorn on 127.0.0.1 and a free port; yields the ``/mcp`` URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", ws="none")
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(10):
            while not server.started:  # noqa: ASYNC110 (uvicorn exposes a flag, not an event)
                await anyio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            server.should_exit = True


class RawClient:
    """JSON-RPC over HTTP by hand, so tests can see exact bytes, codes and statuses."""

    def __init__(self, http: httpx.AsyncClient, url: str, *, token: str | None = None) -> None:
        self.http = http
        self.url = url
        self.token = token
        self._next_id = 0

    async def post(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        capabilities: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        request_id: int | None = None,
        name: str | None = None,
    ) -> httpx.Response:
        """Send one request with the 2026-07-28 envelope and the routing headers."""
        if request_id is None:
            self._next_id += 1
            request_id = self._next_id
        body_params = dict(params or {})
        body_params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL,
            "io.modelcontextprotocol/clientCapabilities": dict(
                WITH_TASKS if capabilities is None else capabilities
            ),
        }
        sent = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": PROTOCOL,
            "mcp-method": method,
        }
        routed = name if name is not None else body_params.get("name") or body_params.get("taskId")
        if isinstance(routed, str):
            sent["mcp-name"] = routed
        if self.token is not None:
            sent["authorization"] = f"Bearer {self.token}"
        sent.update(headers or {})
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body_params}
        return await self.http.post(self.url, content=json.dumps(body), headers=sent)

    async def call(self, method: str, params: Mapping[str, Any] | None = None, **kw: Any) -> Any:
        """The decoded JSON-RPC response object (``result`` or ``error``)."""
        return decode(await self.post(method, params, **kw))


def decode(response: httpx.Response) -> Any:
    """A JSON-RPC message from a JSON or SSE response."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data: "):
                message = json.loads(line[6:])
                if "id" in message:
                    return message
        raise AssertionError("no response in the event stream")
    return response.json()
