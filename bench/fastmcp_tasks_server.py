"""fastmcp-tasks 4.1.4, the comparison server of the HTTP sections, configured as its users
would run it for the workload.

Runs with the Python of its own virtualenv (``.cache/bench/fastmcp-tasks``, made by
``bench/served.py``), so it imports nothing of this project but ``bench/stack.py`` (the
standard library alone), from the repository's root:

    .cache/bench/fastmcp-tasks/bin/python -m bench.fastmcp_tasks_server --port 8126 \\
        --concurrency 50 [--url redis://127.0.0.1:6379/0 --name mcpt_bench_peer_1a2b] \\
        [--stack uvloop]

``--url`` is its Docket backend: ``memory://`` (its default, an in-process Redis) or its
production backend, Redis. ``--concurrency`` is its worker's limit on tasks running at once
(its own default is 10; a workload that keeps 50 tasks in flight needs at least 50, or its
tasks queue behind the limit and are polled several times as often). ``--name`` is the
Docket queue's name, the prefix of every key it writes. The same tool as ours (``nap(ms)``,
always a task: it reports progress once, sleeps, answers), served over Streamable HTTP at /mcp
by ``uvicorn.run`` on the ``--stack`` of ``bench/servers.py`` (asyncio and h11, or uvloop
and httptools).
"""

from __future__ import annotations

import argparse
import asyncio

import uvicorn
from fastmcp import Context, FastMCP
from fastmcp_tasks import TasksExtension

from bench.stack import reporting

#: The stacks of ``bench/servers.py``: uvicorn's loop and HTTP parser settings.
STACKS = {"asyncio": ("asyncio", "h11"), "uvloop": ("uvloop", "httptools")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--url", default="memory://", help="the Docket backend")
    parser.add_argument("--concurrency", type=int, required=True, help="tasks running at once")
    parser.add_argument("--name", default="fastmcp", help="the Docket queue (key prefix)")
    parser.add_argument("--stack", choices=list(STACKS), default="asyncio")
    args = parser.parse_args()
    mcp = FastMCP("bench-fastmcp-tasks", lifespan=reporting(None))
    mcp.add_extension(TasksExtension(url=args.url, name=args.name, concurrency=args.concurrency))

    @mcp.tool(task=True)
    async def nap(ms: int, ctx: Context) -> str:
        """Report progress once, sleep ``ms`` milliseconds, then answer."""
        await ctx.report_progress(0, ms if ms > 0 else None, "napping")  # a total is > 0
        await asyncio.sleep(ms / 1000)
        return f"slept {ms} ms"

    app = mcp.http_app(path="/mcp")
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
