"""Turn an MCP server object into an ASGI app and run it with uvicorn (in-process or foreground)."""

from __future__ import annotations

import importlib
import socket
import sys
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

MCP_PATH = "/mcp"


def load_object(spec: str) -> Any:
    """Import `module:attr` (the current directory is importable, as with `uvicorn`)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected module:attr, got {spec!r}")
    if "" not in sys.path:
        sys.path.insert(0, "")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    return target


def is_fastmcp(app: object) -> bool:
    """True for a FastMCP server, without importing fastmcp when it is not in use."""
    module = sys.modules.get("fastmcp")
    return module is not None and isinstance(app, module.FastMCP)


def asgi_app(app: object) -> Any:
    """The Streamable HTTP ASGI app at `/mcp` for an MCPServer, low-level Server or FastMCP."""
    if isinstance(app, MCPServer | Server):
        return app.streamable_http_app(streamable_http_path=MCP_PATH)
    if is_fastmcp(app):
        return app.http_app(path=MCP_PATH)  # type: ignore[attr-defined]
    raise TypeError(f"cannot serve {type(app).__name__}: expected MCPServer, Server or FastMCP")


def free_socket(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A bound listening socket; port 0 lets the OS choose a free port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock


@asynccontextmanager
async def running(app: object, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve `app` in this process for the duration of the block; yields the `/mcp` URL."""
    sock = free_socket(host, port)
    bound_port = sock.getsockname()[1]
    config = uvicorn.Config(asgi_app(app), log_level="warning", lifespan="on")
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
    # uvicorn only logs a failed lifespan shutdown; in-process callers (the demo, tests)
    # must not mistake a server that could not stop cleanly for one that did.
    lifespan = getattr(server, "lifespan", None)
    if getattr(lifespan, "shutdown_failed", False) or getattr(lifespan, "error_occurred", False):
        raise RuntimeError("the HTTP server's lifespan failed to shut down cleanly")


def serve_forever(app: object, host: str, port: int) -> None:
    """Serve `app` in the foreground until interrupted."""
    uvicorn.run(asgi_app(app), host=host, port=port, log_level="info")
