"""fastmcp-tasks 4.1.4 on its memory backend, the comparison server of the HTTP sections.

Runs with the Python of its own virtualenv (``.cache/bench/fastmcp-tasks``, made by
``bench/served.py``), so it imports nothing of this project:

    .cache/bench/fastmcp-tasks/bin/python bench/fastmcp_tasks_server.py --port 8126

The same tool as ours (``nap(ms)``, always a task), served over Streamable HTTP at /mcp.
"""

from __future__ import annotations

import argparse
import asyncio

import uvicorn
from fastmcp import FastMCP
from fastmcp_tasks import TasksExtension


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    mcp = FastMCP("bench-fastmcp-tasks")
    mcp.add_extension(TasksExtension(url="memory://"))

    @mcp.tool(task=True)
    async def nap(ms: int) -> str:
        """Sleep ``ms`` milliseconds, then answer."""
        await asyncio.sleep(ms / 1000)
        return f"slept {ms} ms"

    app = mcp.http_app(path="/mcp")
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
