"""A low-level SDK `Server` with tasks: `tasks.register(...)` + `tasks.install(server)`.

    uv run python examples/lowlevel_server.py                  # http://127.0.0.1:8000/mcp
    uv run mcp-tasks call http://127.0.0.1:8000/mcp checksum text=hello

The app leaves the store to whoever runs it (`Tasks()` pins none): `mcp-tasks serve --store URL`
hands it one; run directly, it uses $MCP_TASKS_STORE_URL, else a private memory store.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server.lowlevel import Server

from mcp_tasks import Tasks, current_task_context

if TYPE_CHECKING:
    from collections.abc import Mapping

    from mcp.server.context import ServerRequestContext

tasks = Tasks()

CHECKSUM = types.Tool(
    name="checksum",
    description="SHA-256 of a text, slowly (a task for clients that support tasks).",
    input_schema={
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
)


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[CHECKSUM])


async def call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    if params.name != CHECKSUM.name:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"Unknown tool {params.name}")],
            is_error=True,
        )
    return await checksum(params.arguments or {})


async def checksum(arguments: Mapping[str, Any]) -> types.CallToolResult:
    """The tool itself, without a request: what a task of it runs again after its process
    died (``tasks.register(..., run=checksum)``)."""
    text = str(arguments.get("text", ""))
    task = current_task_context()  # the task's context here, or an inline one
    if task is not None:
        await task.progress(1, 2, "Hashing")
    await anyio.sleep(0.3)
    digest = hashlib.sha256(text.encode()).hexdigest()
    return types.CallToolResult(content=[types.TextContent(type="text", text=digest)])


server: Server[Any] = Server(
    "checksums", lifespan=tasks.lifespan, on_list_tools=list_tools, on_call_tool=call_tool
)
tasks.register("checksum", mode="optional", poll_interval_ms=200, run=checksum)
tasks.install(server)  # after the tools/call handler is set: it wraps it

if __name__ == "__main__":
    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=8000)
