"""`mcp-tasks serve [APP]`: serve an app (or the demo tools) with Tasks over HTTP at /mcp."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer

from mcp_tasks.cli._serving import MCP_PATH, is_fastmcp, load_object, serve_forever
from mcp_tasks.cli._stores import resolve_store_url
from mcp_tasks.client import TASKS_EXTENSION
from mcp_tasks.stores.urls import URL_ENV, store_from_url

DESCRIPTION = """Serve APP (module:attr naming an MCPServer, a low-level Server or a FastMCP server)
or, with no APP, the built-in demo tools (build, deploy, sleep), over Streamable HTTP at /mcp.

--store is exported as $MCP_TASKS_STORE_URL before APP is imported, so an app that builds
its Tasks with store_from_url() picks it up. A FastMCP app whose `task=True` tools have no
tasks extension gets ours, on that store."""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "serve",
        help="serve an app (or the demo tools) with Tasks over Streamable HTTP",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("app", nargs="?", metavar="APP", help="module:attr of the server to serve")
    parser.add_argument(
        "--store",
        metavar="URL",
        help="store URL (default: $MCP_TASKS_STORE_URL or sqlite:///./mcp-tasks.db)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.set_defaults(handler=run)


def _declares_tasks(app: object) -> bool:
    if isinstance(app, MCPServer):
        app = (
            app._lowlevel_server
        )  # the SDK keeps the advertised extensions on the low-level server
    if isinstance(app, Server):
        return TASKS_EXTENSION in app.extensions
    return TASKS_EXTENSION in getattr(app, "_extensions", {})


def prepare_app(spec: str | None, store_url: str) -> Any:
    """The server object to serve, with Tasks enabled on it, on the store at `store_url`."""
    # The server side loads only for the commands that serve.
    from mcp_tasks import Tasks  # noqa: PLC0415
    from mcp_tasks.demo import demo_server  # noqa: PLC0415

    if spec is None:
        return demo_server(store_from_url(store_url))
    os.environ[URL_ENV] = store_url
    app = load_object(spec)
    if _declares_tasks(app):
        return app
    if is_fastmcp(app):
        # FastMCP's `task=True` tools need only an extension with the tasks identifier.
        # Built from the URL, so Tasks owns the store and closes it at shutdown.
        app.add_extension(Tasks(store=store_url).fastmcp_extension())
        return app
    if isinstance(app, MCPServer | Server):
        # Which tools are tasks is the app's own decision (tasks.tool / tasks.register).
        raise SystemExit(
            f"mcp-tasks serve: {spec} does not enable the tasks extension; see "
            "Tasks.extension() (MCPServer) or Tasks.install() (low-level Server)"
        )
    raise SystemExit(f"mcp-tasks serve: {spec} is a {type(app).__name__}, not an MCP server")


def run(args: argparse.Namespace) -> int:
    store_url = resolve_store_url(args.store, for_serving=True)
    app = prepare_app(args.app, store_url)
    print(
        f"mcp-tasks: serving on http://{args.host}:{args.port}{MCP_PATH} (store: {store_url})",
        file=sys.stderr,
    )
    serve_forever(app, args.host, args.port)
    return 0
