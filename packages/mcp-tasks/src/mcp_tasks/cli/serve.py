"""`mcp-tasks serve [APP]`: serve an app (or the demo tools) with Tasks over HTTP at /mcp."""

from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass
from typing import Any

import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer

from mcp_tasks.adapters.asgi import MCP_PATH, asgi_app, is_fastmcp
from mcp_tasks.cli._stores import resolve_store_url
from mcp_tasks.cli.demo_tools import demo_server
from mcp_tasks.stores.opening import describe_store, store_from_url
from mcp_tasks.tasks import Tasks, collect_tasks

DESCRIPTION = """Serve APP (module:attr naming an MCPServer, a low-level Server or a FastMCP server)
or, with no APP, the built-in demo tools (build, deploy, sleep), over Streamable HTTP at /mcp.

The store: an app whose Tasks has no store of its own (`Tasks()`) is handed the --store
store (default: $MCP_TASKS_STORE_URL, else sqlite:///./mcp-tasks.db). An app that pins its
store (`Tasks(store=...)`) keeps it; serve refuses a different --store. A FastMCP app whose
`task=True` tools have no tasks extension gets ours. The banner names the store served."""


class ServeError(Exception):
    """Why `serve` cannot serve APP as asked: one line for the user."""


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


@dataclass
class Prepared:
    """An app ready to serve and the stores its tasks really use (for the banner)."""

    app: Any
    stores: list[str]


def load_object(spec: str) -> tuple[Any, Any]:
    """Import `module:attr` (the current directory is importable, as with `uvicorn`);
    returns the module and the object."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ServeError(f"APP must be module:attr, got {spec!r}")
    if "" not in sys.path:
        sys.path.insert(0, "")
    module: Any = importlib.import_module(module_name)
    target: Any = module
    for part in attr.split("."):
        target = getattr(target, part)
    return module, target


def prepare_app(spec: str | None, store_flag: str | None) -> Prepared:
    """The server object to serve, with Tasks enabled on the store it will really use.

    Raises:
        ServeError: APP pins a store other than ``store_flag``, or does not enable tasks.
    """
    if spec is None:
        store = store_from_url(resolve_store_url(store_flag, for_serving=True))
        return Prepared(demo_server(store), [describe_store(store)])
    with collect_tasks() as created:
        module, app = load_object(spec)
    # Tasks built at import, and (for a module imported before) the module's own.
    found = [*created, *(v for v in vars(module).values() if isinstance(v, Tasks))]
    attached = list({id(t): t for t in found if t.attached}.values())
    if attached:
        return Prepared(app, [_hand_store(t, store_flag, spec) for t in attached])
    if is_fastmcp(app):
        # FastMCP's `task=True` tools need only an extension with the tasks identifier.
        tasks = Tasks(store=resolve_store_url(store_flag, for_serving=True))
        try:
            app.add_extension(tasks.fastmcp_extension())
        except ValueError:  # FastMCP: an extension with that identifier is registered
            if store_flag is not None:
                raise ServeError(
                    f"{spec} serves tasks with an extension of its own, not mcp-tasks; "
                    "--store does not apply to it"
                ) from None
            return Prepared(app, ["the app's own tasks extension"])
        return Prepared(app, [tasks.store_description])
    if isinstance(app, MCPServer | Server):
        # Which tools are tasks is the app's own decision (tasks.tool / tasks.register).
        raise ServeError(
            f"{spec} does not enable mcp-tasks; see Tasks.extension() (MCPServer) or "
            "Tasks.install() (low-level Server)"
        )
    raise ServeError(f"{spec} is a {type(app).__name__}, not an MCP server")


def _hand_store(tasks: Tasks, store_flag: str | None, spec: str) -> str:
    """Give an unpinned Tasks the store serve chose; check a pinned one against --store."""
    if not tasks.store_pinned:
        tasks.use_store(resolve_store_url(store_flag, for_serving=True))
        return tasks.store_description
    pinned = tasks.store_description
    # Stores connect lazily: opening the flag's URL only to name it does no I/O.
    if store_flag is not None and describe_store(store_from_url(store_flag)) != pinned:
        raise ServeError(
            f"{spec} pins its task store to {pinned}; drop --store, or build its Tasks "
            "without a store so serve can choose it"
        )
    return pinned


def run(args: argparse.Namespace) -> int:
    try:
        prepared = prepare_app(args.app, args.store)
    except ServeError as error:
        print(f"mcp-tasks serve: {error}", file=sys.stderr)
        return 2
    stores = ", ".join(dict.fromkeys(prepared.stores))
    print(
        f"mcp-tasks: serving on http://{args.host}:{args.port}{MCP_PATH} (store: {stores})",
        file=sys.stderr,
    )
    uvicorn.run(asgi_app(prepared.app), host=args.host, port=args.port, log_level="info")
    return 0
