"""The servers the HTTP sections drive, each run as its own process (uvicorn, one worker).

    python -m bench.servers ours --store memory:// --port 8123
    python -m bench.servers ours-sdk-path --port 8126  # ours without the tasks/* fast path
    python -m bench.servers sdk --port 8124          # the SDK floor: a trivial tools/call
    python -m bench.servers starlette --port 8125    # the bare floor: a JSON-RPC route

``ours`` is an ``MCPServer`` with our extension on the given store and one task tool,
``nap(ms)``: it sleeps ``ms`` milliseconds and answers, served as we recommend
(``tasks.http_app(mcp)``: ``tasks/*`` polls on the fast path); ``ours-sdk-path`` is the
same server on the SDK's app alone. fastmcp-tasks runs from its own
virtualenv with ``bench/fastmcp_tasks_server.py`` (it must not import this project).
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from mcp_tasks import StoreOptions, Tasks, store_from_url

if TYPE_CHECKING:
    from starlette.requests import Request


def ours(store_url: str, max_rows: int | None, *, fast_path: bool = True) -> Any:
    """Our server: ``nap`` runs as a task (mode required) on the store at ``store_url``."""
    return ours_with_tasks(store_url, max_rows, fast_path=fast_path)[0]


def ours_with_tasks(
    store_url: str, max_rows: int | None, *, fast_path: bool = True
) -> tuple[Any, Tasks]:
    """Our server's ASGI app (``fast_path=False``: the SDK's app alone), and its Tasks."""
    tasks = Tasks(store=store_from_url(store_url, StoreOptions(max_rows=max_rows)))
    mcp: MCPServer[Any] = MCPServer(
        "bench", extensions=[tasks.extension()], lifespan=tasks.lifespan, log_level="WARNING"
    )

    @tasks.tool(mcp, mode="required", poll_interval_ms=50)
    async def nap(ms: int) -> str:
        """Sleep ``ms`` milliseconds, then answer."""
        await anyio.sleep(ms / 1000)
        return f"slept {ms} ms"

    return (tasks.http_app(mcp) if fast_path else mcp.streamable_http_app()), tasks


def sdk() -> Any:
    """The official SDK's floor: ``MCPServer`` with one trivial tool, no tasks."""
    mcp: MCPServer[Any] = MCPServer("bench-sdk", log_level="WARNING")

    @mcp.tool()
    def echo(text: str) -> str:
        """Answer the text."""
        return text

    return mcp.streamable_http_app()


async def jsonrpc(request: Request) -> Response:
    """Parse the JSON-RPC request and answer a fixed result: the web stack alone."""
    message = json.loads(await request.body())
    body = {"jsonrpc": "2.0", "id": message.get("id"), "result": {"status": "working"}}
    return Response(json.dumps(body), media_type="application/json")


def starlette() -> Any:
    """The bare floor: one Starlette route answering JSON-RPC at /mcp."""
    return Starlette(routes=[Route("/mcp", jsonrpc, methods=["POST"])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["ours", "ours-sdk-path", "sdk", "starlette"])
    parser.add_argument("--store", default="memory://")
    parser.add_argument("--max-rows", type=int, default=0, help="row cap; 0 = unlimited")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    if args.kind in ("ours", "ours-sdk-path"):
        app = ours(args.store, args.max_rows or None, fast_path=args.kind == "ours")
    else:
        app = sdk() if args.kind == "sdk" else starlette()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
