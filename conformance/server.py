"""The fixture server the official conformance runner drives: its whole 2026-07-28 server
specification and its ``tasks-*`` scenarios, on one server with the tasks extension installed.

    uv run python conformance/server.py --store memory:// --port 8765

Two of them on one durable store (``--store sqlite:///tasks.db``, or Postgres) share the
tasks: a task whose server dies is finished by the other, ``--lease-ms`` after the death.

Serves Streamable HTTP at ``http://127.0.0.1:PORT/mcp``: the seven fixture tools of the
runner's tasks scenarios (see ``docs/architecture.md``, "The conformance runner") beside the
core fixtures of ``core.py`` (tools, resources, a template, prompts, completion), as a
user's server with tasks would serve them. ``--fastmcp`` serves the same on FastMCP with our
FastMCP extension (``fastmcp_server.py``).
"""

from __future__ import annotations

import argparse
import secrets
import sys
from typing import TYPE_CHECKING, Any

import anyio
import uvicorn
from core import CONFIRM_SCHEMA, add_core
from mcp.server.mcpserver import MCPServer, RequestStateSecurity
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError

from mcp_tasks import RunnerOptions, TaskContext, Tasks, store_from_url
from mcp_tasks.testing import free_socket

if TYPE_CHECKING:
    from collections.abc import Mapping


def ask_name(arguments: Mapping[str, Any], answers: Mapping[str, Any]) -> dict[str, Any] | None:
    """test_tool_with_task's input round: a name, asked before the task exists."""
    if "name" in answers:
        return None
    return {
        "name": {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": "What is your name?",
                "requestedSchema": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}},
                    "required": ["name"],
                },
            },
        }
    }


def build(tasks: Tasks) -> MCPServer[Any]:
    """The fixture server on ``tasks``: the tasks fixtures and the core ones."""
    mcp: MCPServer[Any] = MCPServer(
        "mcp-tasks-conformance",
        version="0.1.0",
        extensions=[tasks.extension()],
        lifespan=tasks.lifespan,
        # Signs the request states the input-round tools hand out (a fresh key per process).
        request_state_security=RequestStateSecurity(keys=[secrets.token_bytes(32)]),
    )
    add_core(mcp)

    @mcp.tool()
    def greet(name: str) -> str:
        """Say hello (never a task)."""
        return f"Hello, {name}!"

    @tasks.tool(mcp, mode="optional", poll_interval_ms=500)
    async def slow_compute(seconds: float, ctx: TaskContext, label: str = "result") -> str:
        """Sleep, then report."""
        if seconds > 0:
            await ctx.progress(0, seconds, f"Computing {label}")
        await anyio.sleep(seconds)
        return f"Computed {label} after {seconds:g}s"

    @tasks.tool(mcp, mode="required", poll_interval_ms=500)
    async def failing_job() -> str:
        """Fail as a tool (isError), after a second."""
        await anyio.sleep(1)
        raise ToolError("The job failed")

    @tasks.tool(mcp, mode="optional", poll_interval_ms=500)
    async def protocol_error_job() -> str:
        """Fail with a JSON-RPC error."""
        await anyio.sleep(0.2)
        raise MCPError(code=-32603, message="The job hit an internal error")

    @tasks.tool(mcp, mode="optional", poll_interval_ms=500)
    async def confirm_delete(filename: str, ctx: TaskContext) -> str:
        """Ask before deleting."""
        answer = await ctx.elicit("confirm", f"Delete {filename}?", CONFIRM_SCHEMA)
        content = answer.get("content")
        confirmed = isinstance(content, dict) and content.get("confirm") is True
        return f"Deleted {filename}" if confirmed else f"Kept {filename}"

    @tasks.tool(mcp, mode="optional", poll_interval_ms=500)
    async def multi_input(ctx: TaskContext) -> str:
        """Ask two questions at once."""
        schema = {
            "type": "object",
            "properties": {"name": {"type": "string"}, "confirm": {"type": "boolean"}},
        }
        answers = await ctx.request_input(
            {
                key: {
                    "method": "elicitation/create",
                    "params": {"mode": "form", "message": text, "requestedSchema": schema},
                }
                for key, text in (("first", "First answer?"), ("second", "Second answer?"))
            }
        )
        return f"Got {len(answers)} answers"

    @tasks.tool(mcp, mode="required", preflight=ask_name, poll_interval_ms=500)
    async def test_tool_with_task(ctx: TaskContext) -> str:
        """An input round first, then a task that greets the answer."""
        answer = ctx.input_responses.get("name") or {}
        content = answer.get("content") if isinstance(answer, dict) else None
        name = content.get("name") if isinstance(content, dict) else None
        return f"Hello, {name}!"

    return mcp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="memory://", help="Store URL (default memory://)")
    parser.add_argument("--port", type=int, default=8765, help="0: a free port, chosen here")
    parser.add_argument(
        "--lease-ms",
        type=int,
        default=30_000,
        help="how soon another process takes over the tasks of one that died (default 30000)",
    )
    parser.add_argument(
        "--sdk-path",
        action="store_true",
        help="serve the SDK's app alone, without the tasks/* fast path (to compare the two)",
    )
    parser.add_argument(
        "--fastmcp",
        action="store_true",
        help="serve the fixture on FastMCP with our FastMCP extension (fastmcp_server.py)",
    )
    args = parser.parse_args()
    tasks = Tasks(store=store_from_url(args.store), runner=RunnerOptions(lease_ms=args.lease_ms))
    if args.fastmcp:
        import fastmcp_server  # noqa: PLC0415 (fastmcp is imported only when asked for)

        # FastMCP checks Host and Origin only when asked (the SDK's app always does).
        app = fastmcp_server.build(tasks).http_app(path="/mcp", host_origin_protection="auto")
    else:
        mcp = build(tasks)
        app = mcp.streamable_http_app() if args.sdk_path else tasks.http_app(mcp)
    # Bound here, and said once bound (as `mcp-tasks serve` says it): whoever started this
    # process learns the port, and that it is this process that listens there.
    sock = free_socket(port=args.port)
    port = sock.getsockname()[1]
    print(f"mcp-tasks: serving on http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
