"""Run an MCP server in this process for a test, a demo or a benchmark, and talk to it.

What the project's own tests use, public for anyone testing a server or a Store of their own::

    async with running(app) as url:           # an MCPServer, low-level Server or FastMCP
        async with tasks_client(url) as client:   # declares the tasks extension
            handle = await start_tool(client, "build", {"ref": "main"})

``running_asgi`` serves any ASGI app (a Starlette app with ``tasks.lifespan``), and
:class:`RawClient` speaks JSON-RPC by hand, so a test sees exact bytes, codes and statuses.
"""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import uvicorn
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings

from mcp_tasks.adapters.asgi import MCP_PATH, SHUTDOWN_GRACE_S, asgi_app
from mcp_tasks.adapters.listener import tcp_listener
from mcp_tasks.client import start_tool, tasks_client

if TYPE_CHECKING:
    import socket
    from collections.abc import AsyncIterator, Mapping
    from contextlib import AbstractAsyncContextManager

    import httpx2 as httpx

__all__ = [
    "MCP_PATH",
    "PROTOCOL",
    "TASKS",
    "WITH_TASKS",
    "MessageStream",
    "RawClient",
    "StaticTokens",
    "decode",
    "free_socket",
    "running",
    "running_asgi",
    "start_tool",
    "static_auth",
    "tasks_client",
]

#: The protocol revision the tasks extension speaks, and its identifier.
PROTOCOL = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
#: Client capabilities that declare the tasks extension (and form elicitation).
WITH_TASKS: dict[str, Any] = {"elicitation": {}, "extensions": {TASKS: {}}}


def free_socket(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A bound listening socket to serve on (as ``mcp-tasks serve`` binds it, so answers
    are not held back by Nagle's algorithm); port 0 lets the OS choose a free port."""
    return tcp_listener(host, port)


def running(
    app: object, host: str = "127.0.0.1", port: int = 0
) -> AbstractAsyncContextManager[str]:
    """Serve ``app`` (an MCPServer, low-level Server or FastMCP) over Streamable HTTP in this
    process for the duration of the block, its lifespan included; yields the ``/mcp`` URL.

    Raises:
        RuntimeError: the server failed to start, or its lifespan failed to shut down
            cleanly (uvicorn only logs that; a test must not mistake it for a clean stop).
    """
    return running_asgi(asgi_app(app), host, port)


@asynccontextmanager
async def running_asgi(
    app: Any, host: str = "127.0.0.1", port: int = 0, *, http: str = "auto"
) -> AsyncIterator[str]:
    """Serve an ASGI app that mounts MCP at ``/mcp`` (as :func:`running` does); yields the
    ``/mcp`` URL. ``http`` is uvicorn's HTTP parser: ``"auto"`` (httptools where it is
    installed, else h11), ``"h11"`` or ``"httptools"``. Raises as :func:`running` does."""
    sock = free_socket(host, port)
    bound_port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        http=http,
        log_level="warning",
        lifespan="on",
        ws="none",
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,  # as `mcp-tasks serve` stops
    )
    server = uvicorn.Server(config)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            while not server.started:
                if server.should_exit:
                    raise RuntimeError("the HTTP server failed to start")
                await anyio.sleep(0.01)
            try:
                yield f"http://{host}:{bound_port}{MCP_PATH}"
            finally:
                server.should_exit = True
    finally:
        sock.close()
    lifespan = getattr(server, "lifespan", None)
    if getattr(lifespan, "shutdown_failed", False) or getattr(lifespan, "error_occurred", False):
        raise RuntimeError("the HTTP server's lifespan failed to shut down cleanly")


class RawClient:
    """JSON-RPC over HTTP by hand, with the 2026-07-28 envelope and routing headers, so a
    test sees exact bytes, codes and statuses (the SDK's client would validate them away)."""

    def __init__(self, http: httpx.AsyncClient, url: str, *, token: str | None = None) -> None:
        self.http = http
        self.url = url
        self.token = token
        self._next_id = 0

    def _message(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        capabilities: Mapping[str, Any] | None,
        headers: Mapping[str, str] | None,
        request_id: int | str | None,
        name: str | None,
    ) -> tuple[str, dict[str, str]]:
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
        return json.dumps(body), sent

    async def post(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        capabilities: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        request_id: int | str | None = None,
        name: str | None = None,
    ) -> httpx.Response:
        """Send one request: ``_meta`` carries the protocol version and ``capabilities``
        (default :data:`WITH_TASKS`); ``Mcp-Name`` is ``name``, else the tool name or taskId;
        ``headers`` override any header."""
        content, sent = self._message(
            method,
            params,
            capabilities=capabilities,
            headers=headers,
            request_id=request_id,
            name=name,
        )
        return await self.http.post(self.url, content=content, headers=sent)

    @asynccontextmanager
    async def stream(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        capabilities: Mapping[str, Any] | None = None,
        request_id: int | str | None = None,
    ) -> AsyncIterator[MessageStream]:
        """Send one request and read its response as it arrives (``subscriptions/listen``):
        each SSE message, or the one JSON body, in order."""
        content, sent = self._message(
            method,
            params,
            capabilities=capabilities,
            headers=None,
            request_id=request_id,
            name=None,
        )
        async with self.http.stream("POST", self.url, content=content, headers=sent) as response:
            yield MessageStream(response)

    async def call(self, method: str, params: Mapping[str, Any] | None = None, **kw: Any) -> Any:
        """The decoded JSON-RPC response object (``result`` or ``error``)."""
        return decode(await self.post(method, params, **kw))


class MessageStream:
    """The JSON-RPC messages of one streamed response, in arrival order."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._messages = self._read()

    async def _read(self) -> AsyncIterator[dict[str, Any]]:
        if not self.response.headers.get("content-type", "").startswith("text/event-stream"):
            yield json.loads(await self.response.aread())
            return
        async for line in self.response.aiter_lines():
            if line.startswith("data: "):
                yield json.loads(line[6:])

    async def next(self, timeout_s: float = 30.0) -> dict[str, Any] | None:
        """The next message; ``None`` when the response ended.

        Raises:
            TimeoutError: none arrived within ``timeout_s``.
        """
        with anyio.fail_after(timeout_s):
            return await anext(self._messages, None)


def decode(response: httpx.Response) -> Any:
    """The JSON-RPC response in a JSON or SSE (``text/event-stream``) HTTP response.

    Raises:
        ValueError: an event stream carried no response.
    """
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data: "):
                message = json.loads(line[6:])
                if "id" in message:
                    return message
        raise ValueError("no response in the event stream")
    return response.json()


TEST_ISSUER = "https://auth.example"


class StaticTokens:
    """A token verifier for tests: each of ``tokens`` is a valid bearer token whose principal
    is the token itself (one issuer, one client, the token as subject); any other token is
    refused. ``StaticTokens("alice", "bob")``: two owners.

    ``subjects`` gives a token another principal (``{"alice-2": "alice"}``: a second token
    of alice's), ``expires_at`` an expiry (seconds since the epoch); :meth:`revoke` refuses
    a token from then on."""

    def __init__(
        self,
        *tokens: str,
        subjects: Mapping[str, str] | None = None,
        expires_at: Mapping[str, int] | None = None,
    ) -> None:
        self.tokens = set(tokens) | set(subjects or {})
        self.subjects = dict(subjects or {})
        self.expires_at = dict(expires_at or {})

    def revoke(self, token: str) -> None:
        """Refuse ``token`` from now on."""
        self.tokens.discard(token)

    async def verify_token(self, token: str) -> AccessToken | None:
        if token not in self.tokens:
            return None
        return AccessToken(
            token=token,
            client_id="test-client",
            scopes=[],
            expires_at=self.expires_at.get(token),
            subject=self.subjects.get(token, token),
            claims={"iss": TEST_ISSUER},
        )


def static_auth(*tokens: str, verifier: StaticTokens | None = None) -> dict[str, Any]:
    """The ``MCPServer`` keyword arguments that make it require one of ``tokens``
    (:class:`StaticTokens`): ``MCPServer(..., **static_auth("alice", "bob"))``; or
    ``verifier``'s tokens (expiring, revocable)."""
    settings = AuthSettings(issuer_url=TEST_ISSUER, resource_server_url=None)  # type: ignore[arg-type]
    return {"auth": settings, "token_verifier": verifier or StaticTokens(*tokens)}
