"""An MCP server object (official SDK or FastMCP) as the Streamable HTTP ASGI app at ``/mcp``."""

from __future__ import annotations

import sys
from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer

MCP_PATH = "/mcp"


def is_fastmcp(app: object) -> bool:
    """True for a FastMCP server, without importing fastmcp when it is not in use."""
    module = sys.modules.get("fastmcp")
    return module is not None and isinstance(app, module.FastMCP)


def asgi_app(app: object) -> Any:
    """The Streamable HTTP ASGI app at ``/mcp`` for an MCPServer, low-level Server or FastMCP."""
    if isinstance(app, MCPServer | Server):
        return app.streamable_http_app(streamable_http_path=MCP_PATH)
    if is_fastmcp(app):
        return app.http_app(path=MCP_PATH)  # type: ignore[attr-defined]
    raise TypeError(f"cannot serve {type(app).__name__}: expected MCPServer, Server or FastMCP")
