"""The servers the HTTP sections drive, each run as its own process (uvicorn, one worker).

    python -m bench.servers ours --store memory:// --port 8123
    python -m bench.servers ours-sdk-path --port 8126  # ours without the tasks/* fast path
    python -m bench.servers ours --create-only --port 8127  # creates tasks, runs none
    python -m bench.servers sdk --port 8124          # the SDK floor: plain tools/calls
    python -m bench.servers starlette --port 8125    # the bare floor: a JSON-RPC route
    python -m bench.servers ours --stack uvloop --port 8128  # uvicorn[standard]'s stack
    mcp-tasks serve bench.serve_app:mcp --store memory:// --port 8129  # by our CLI

``ours`` is an ``MCPServer`` with our extension on the given store and one task tool,
``nap(ms)``: it reports progress once, sleeps ``ms`` milliseconds and answers (as the
conformance fixture's ``slow_compute`` does), served as we recommend
(``tasks.http_app(mcp)``: ``tasks/*`` polls on the fast path); ``ours-sdk-path`` is the
same server on the SDK's app alone; ``--create-only`` makes either create its tasks for
workers (``RunnerOptions(run_tasks=False)``) and run none: a ``tools/call`` is the create alone.
``sdk`` is the official SDK with the same ``nap`` as a plain synchronous tool, and a
trivial ``echo``. fastmcp-tasks runs from its own
virtualenv with ``bench/fastmcp_tasks_server.py`` (it must not import this project).

Each runs under ``uvicorn.run(app)`` (what ``uvicorn module:app`` runs) on the stack
``--stack`` names: ``asyncio`` (the asyncio loop and h11, what ``pip install uvicorn`` gives)
or ``uvloop`` (uvloop and httptools, what ``uvicorn[standard]`` adds);
``bench/serve_app.py`` is ``ours`` for ``mcp-tasks serve``. Each writes the loop and
parser it really runs on where ``$MCP_TASKS_BENCH_STACK`` says (``bench/stack.py``).
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from bench.stack import reporting
from mcp_tasks import RunnerOptions, StoreOptions, TaskContext, Tasks, store_from_url

if TYPE_CHECKING:
    from starlette.requests import Request


def ours(
    store_url: str, max_rows: int | None, *, fast_path: bool = True, run_tasks: bool = True
) -> Any:
    """Our server: ``nap`` runs as a task (mode required) on the store at ``store_url``."""
    return ours_with_tasks(store_url, max_rows, fast_path=fast_path, run_tasks=run_tasks)[0]


def ours_with_tasks(
    store_url: str, max_rows: int | None, *, fast_path: bool = True, run_tasks: bool = True
) -> tuple[Any, Tasks]:
    """Our server's ASGI app (``fast_path=False``: the SDK's app alone), and its Tasks
    (``run_tasks=False``: it creates tasks for workers and runs none)."""
    tasks = Tasks(
        store=store_from_url(store_url, StoreOptions(max_rows=max_rows)),
        runner=RunnerOptions(run_tasks=run_tasks),
    )
    mcp = ours_server(tasks)
    return (tasks.http_app(mcp) if fast_path else mcp.streamable_http_app()), tasks


def ours_server(tasks: Tasks) -> MCPServer[Any]:
    """Our MCP server on ``tasks``: the task tool ``nap``."""
    mcp: MCPServer[Any] = MCPServer(
        "bench",
        extensions=[tasks.extension()],
        lifespan=reporting(tasks.lifespan),
        log_level="WARNING",
    )

    @tasks.tool(mcp, mode="required", poll_interval_ms=50)
    async def nap(ms: int, ctx: TaskContext) -> str:
        """Report progress once, sleep ``ms`` milliseconds, then answer."""
        await ctx.progress(0, ms if ms > 0 else None, "napping")  # as the peer's
        await anyio.sleep(ms / 1000)
        return f"slept {ms} ms"

    return mcp


def sdk() -> Any:
    """The official SDK's floor: ``MCPServer`` with no tasks, ``nap`` as a plain
    synchronous tool (the tool of a task, without the task) and a trivial ``echo``."""
    mcp: MCPServer[Any] = MCPServer("bench-sdk", lifespan=reporting(None), log_level="WARNING")

    @mcp.tool()
    def echo(text: str) -> str:
        """Answer the text."""
        return text

    @mcp.tool()
    async def nap(ms: int, ctx: Context) -> str:
        """Report progress once, sleep ``ms`` milliseconds, then answer."""
        await ctx.report_progress(0, ms if ms > 0 else None, "napping")
        await anyio.sleep(ms / 1000)
        return f"slept {ms} ms"

    return mcp.streamable_http_app()


async def jsonrpc(request: Request) -> Response:
    """Parse the JSON-RPC request and answer a fixed result: the web stack alone."""
    message = json.loads(await request.body())
    body = {"jsonrpc": "2.0", "id": message.get("id"), "result": {"status": "working"}}
    return Response(json.dumps(body), media_type="application/json")


def starlette() -> Any:
    """The bare floor: one Starlette route answering JSON-RPC at /mcp."""
    return Starlette(routes=[Route("/mcp", jsonrpc, methods=["POST"])], lifespan=reporting(None))


#: The stacks ``--stack`` names: uvicorn's loop and HTTP parser settings.
STACKS = {"asyncio": ("asyncio", "h11"), "uvloop": ("uvloop", "httptools")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["ours", "ours-sdk-path", "sdk", "starlette"])
    parser.add_argument("--store", default="memory://")
    parser.add_argument("--max-rows", type=int, default=0, help="row cap; 0 = unlimited")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--create-only", action="store_true", help="ours: create tasks for workers, run none"
    )
    parser.add_argument("--stack", choices=list(STACKS), default="asyncio")
    args = parser.parse_args()
    if args.kind in ("ours", "ours-sdk-path"):
        app = ours(
            args.store,
            args.max_rows or None,
            fast_path=args.kind == "ours",
            run_tasks=not args.create_only,
        )
    else:
        app = sdk() if args.kind == "sdk" else starlette()
    loop, http = STACKS[args.stack]
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        loop=loop,
        http=http,
    )


if __name__ == "__main__":
    main()
