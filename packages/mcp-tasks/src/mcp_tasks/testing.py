"""Run an MCP server in this process for a test, a demo or a benchmark, and talk to it.

What the project's own tests use, public for anyone testing a server or a Store of their own::

    async with running(app) as url:           # an MCPServer, low-level Server or FastMCP
        async with tasks_client(url) as client:   # declares the tasks extension
            handle = await start_tool(client, "build", {"ref": "main"})
"""

from __future__ import annotations

import socket
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
import uvicorn

from mcp_tasks.adapters.asgi import MCP_PATH, asgi_app
from mcp_tasks.client import start_tool, tasks_client

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ["MCP_PATH", "free_socket", "running", "start_tool", "tasks_client"]


def free_socket(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A bound listening socket; port 0 lets the OS choose a free port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock


@asynccontextmanager
async def running(app: object, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve ``app`` over Streamable HTTP in this process for the duration of the block
    (its lifespan included); yields the ``/mcp`` URL.

    Raises:
        RuntimeError: the server failed to start, or its lifespan failed to shut down
            cleanly (uvicorn only logs that; a test must not mistake it for a clean stop).
    """
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
    lifespan = getattr(server, "lifespan", None)
    if getattr(lifespan, "shutdown_failed", False) or getattr(lifespan, "error_occurred", False):
        raise RuntimeError("the HTTP server's lifespan failed to shut down cleanly")
