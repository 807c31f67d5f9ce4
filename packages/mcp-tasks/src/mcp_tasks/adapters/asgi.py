"""An MCP server object (official SDK or FastMCP) as the Streamable HTTP ASGI app at ``/mcp``."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette

from mcp_tasks.adapters.fast_path import TasksFastPath, with_fast_path

if TYPE_CHECKING:
    from mcp_tasks.engine import TaskEngine

MCP_PATH = "/mcp"

#: How long a stopping HTTP server (uvicorn's `timeout_graceful_shutdown`) waits for open
#: requests before it closes them. A `subscriptions/listen` stream stays open until its
#: tasks end and nothing in ASGI tells it the server is stopping: without a bound, a
#: SIGTERM would wait for the tasks clients listen to. Its clients poll, then reconnect.
SHUTDOWN_GRACE_S = 3


def is_fastmcp(app: object) -> bool:
    """True for a FastMCP server, without importing fastmcp when it is not in use."""
    module = sys.modules.get("fastmcp")
    return module is not None and isinstance(app, module.FastMCP)


def servable(app: object) -> bool:
    """Whether :func:`asgi_app` serves ``app``."""
    return isinstance(app, TasksFastPath | Starlette | MCPServer | Server) or is_fastmcp(app)


def asgi_app(
    app: object,
    *,
    engine: TaskEngine | None = None,
    fast_path: bool = True,
    host: str = "127.0.0.1",
) -> Any:
    """The Streamable HTTP ASGI app at ``/mcp`` for an MCPServer, low-level Server or FastMCP.

    An SDK server's app answers plain ``tasks/*`` requests of ``engine`` (``None``: the one
    serving the server, see :class:`~mcp_tasks.adapters.fast_path.TasksFastPath`) on the fast
    path; ``fast_path=False`` is the SDK's app alone, for the tests and tools that compare
    the two. ``host`` is the address it is served on: the SDK checks the Host header of
    every request against the loopback names only when it is a loopback one, so a server
    bound to another address (``0.0.0.0``) answers the names it is reached by. An ASGI app
    already built for a server (``tasks.http_app(server)``, a
    ``TasksFastPath`` or, with authentication, the SDK's Starlette app) is served as it is."""
    if isinstance(app, TasksFastPath | Starlette):
        return app
    if isinstance(app, MCPServer | Server):
        sdk_app = app.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
        return with_fast_path(sdk_app, engine) if fast_path else sdk_app
    if is_fastmcp(app):
        return app.http_app(path=MCP_PATH)  # type: ignore[attr-defined]
    raise TypeError(
        f"cannot serve {type(app).__name__}: expected MCPServer, Server, FastMCP or "
        "tasks.http_app(server)"
    )
