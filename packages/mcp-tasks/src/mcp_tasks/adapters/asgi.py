"""An MCP server object (official SDK or FastMCP) as the Streamable HTTP ASGI app at ``/mcp``."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from mcp.server.auth.middleware.bearer_auth import RequireAuthMiddleware
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from starlette.applications import Starlette
from starlette.routing import Mount, Route, Router

from mcp_tasks.adapters.fast_path import TasksFastPath, with_fast_path
from mcp_tasks.adapters.listen_middleware import TaskListenMiddleware

if TYPE_CHECKING:
    from collections.abc import Iterator

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


def served_engines(app: object) -> list[TaskEngine]:
    """The task engines ``app`` serves, each once, found on its public parts where the ways
    of serving one leave them: the notification middleware on an SDK server's chain
    (``install()``, ``tool()``, ``serve_notifications()``, FastMCP's extension), the engine
    a ``TasksFastPath`` answers for (``http_app()``), and the SDK servers behind a
    Starlette app's routes."""
    return list({id(engine): engine for engine in _engines_in(app, depth=0)}.values())


def lifespan_of(app: object) -> object:
    """The lifespan ``app`` was built with (``MCPServer``, ``Server`` or Starlette), or
    ``None``: how a ``Tasks`` whose lifespan an app runs is found from the app."""
    if isinstance(app, MCPServer):
        return app.settings.lifespan
    if isinstance(app, Server):
        return app.lifespan
    if isinstance(app, TasksFastPath):
        return lifespan_of(app.app)
    if isinstance(app, Starlette):
        return app.router.lifespan_context
    return None


#: How deep a Starlette app's mounts are followed to the SDK servers behind them.
_MAX_MOUNT_DEPTH = 8


def _engines_in(app: object, depth: int) -> Iterator[TaskEngine]:
    if isinstance(app, MCPServer | Server):
        yield from (m.engine for m in app.middleware if isinstance(m, TaskListenMiddleware))
    if is_fastmcp(app):
        yield from _fastmcp_engines(app)
    if isinstance(app, TasksFastPath):
        if app.engine is not None:
            yield app.engine
        yield from _engines_in(app.app, depth)
    if isinstance(app, StreamableHTTPASGIApp):
        yield from _engines_in(app.session_manager.app, depth)
    if isinstance(app, RequireAuthMiddleware):
        yield from _engines_in(app.app, depth)
    if isinstance(app, Starlette | Router) and depth < _MAX_MOUNT_DEPTH:
        for route in app.routes:
            if isinstance(route, Route):
                yield from _engines_in(route.endpoint, depth + 1)
            elif isinstance(route, Mount):
                yield from _engines_in(route.app, depth + 1)


def _fastmcp_engines(app: object) -> Iterator[TaskEngine]:
    """The engines on a FastMCP server's SDK chain (our extension puts its middleware there
    when FastMCP binds it); none when no extension of ours was built (the adapter's module,
    which imports fastmcp, is then not loaded)."""
    adapter = sys.modules.get("mcp_tasks.adapters.fastmcp")
    if adapter is not None:
        yield from _engines_in(adapter.sdk_server_of(app), depth=0)
