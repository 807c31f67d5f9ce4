"""Adapters for the official MCP SDK: an ``MCPServer`` extension and a low-level ``Server`` install.

The SDK's ``Extension`` has no lifespan hook, so the runner's lifespan is composed by the
user: ``MCPServer(..., lifespan=tasks.lifespan)``, ``Server(..., lifespan=tasks.lifespan)``,
or ``async with tasks.running():`` inside a Starlette/FastAPI lifespan.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from mcp.server.extension import Extension, MethodBinding, compose_tool_call_handler
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolRequestParams, CallToolResult, TextContent

from mcp_tasks.adapters.listen_middleware import serve_task_notifications
from mcp_tasks.adapters.tasks_methods import (
    TaskMethodParams,
    tasks_method_bindings,
    tasks_method_handler,
    view_of,
)
from mcp_tasks.engine import EXTENSION_ID, TASK_METHODS, ArgumentsCheck, ToolCall

if TYPE_CHECKING:
    from collections.abc import Callable

    from mcp.server.auth.provider import TokenVerifier
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from mcp.server.lowlevel.server import Server
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.tools import Tool

    from mcp_tasks.engine import TaskEngine

logger = logging.getLogger(__name__)


async def intercept(
    engine: TaskEngine,
    params: CallToolRequestParams,
    ctx: ServerRequestContext[Any, Any],
    call_next: CallNext,
) -> HandlerResult:
    """The ``tools/call`` interceptor both adapters use."""
    result: HandlerResult = await engine.handle_tool_call(
        view_of(ctx),
        name=params.name,
        arguments=params.arguments,
        input_responses=_raw_input_responses(ctx),
        call_next=lambda: call_next(ctx),
    )
    return result


def _raw_input_responses(ctx: ServerRequestContext[Any, Any]) -> Mapping[str, Any] | None:
    raw = (ctx.params or {}).get("inputResponses")
    return raw if isinstance(raw, Mapping) else None


class TasksExtension(Extension):
    """``io.modelcontextprotocol/tasks`` for ``MCPServer(extensions=[tasks.extension()])``."""

    identifier = EXTENSION_ID

    def __init__(self, engine: TaskEngine) -> None:
        self._engine = engine

    def __repr__(self) -> str:
        return "TasksExtension()"

    @property
    def engine(self) -> TaskEngine:
        """The engine this extension serves."""
        return self._engine

    def settings(self) -> dict[str, Any]:
        return {}  # the extension defines no settings: an empty object means support

    def methods(self) -> Sequence[MethodBinding]:
        return tasks_method_bindings(self._engine, MethodBinding)

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        return await intercept(self._engine, params, ctx, call_next)


def serve_listen(engine: TaskEngine, server: object) -> bool:
    """Serve ``taskIds`` on ``server``'s ``subscriptions/listen`` (an SDK ``Server`` or
    ``MCPServer``; once per server): ``False`` for anything else."""
    from mcp.server.lowlevel.server import Server  # noqa: PLC0415 (only to recognise one)
    from mcp.server.mcpserver import MCPServer  # noqa: PLC0415

    if not isinstance(server, (Server, MCPServer)):
        return False
    verifier = token_verifier_of(server) if isinstance(server, MCPServer) else None
    return serve_task_notifications(engine, server, view_of, verifier)


def token_verifier_of(server: MCPServer[Any]) -> TokenVerifier | None:
    """The token verifier an ``MCPServer`` checks bearer tokens with (``None`` without
    auth), so that a listen stream's token is checked again while the stream runs.

    Private seam: ``MCPServer`` keeps it as ``_token_verifier`` (its ``token_verifier``
    argument, or the one it builds over an ``auth_server_provider``) and offers no public
    accessor. This is the one place that reads it; if the SDK renames it, serving fails
    loudly here. See docs/architecture.md, "Status notifications: the SDK seam"."""
    verifier = getattr(server, "_token_verifier", _MISSING)
    if verifier is _MISSING:
        raise TypeError(
            "MCPServer keeps no _token_verifier: this SDK version is not supported by "
            "mcp-tasks' listen streams"
        )
    return cast("TokenVerifier | None", verifier)


_MISSING = object()


def install(engine: TaskEngine, server: Server[Any]) -> TasksExtension:
    """Serve the extension on a low-level ``Server``: advertise it, add ``tasks/*``, wrap
    the ``tools/call`` handler (register it before installing) and serve ``taskIds`` on
    ``subscriptions/listen`` (pass ``on_subscriptions_listen=`` to the ``Server``)."""
    extension = TasksExtension(engine)
    serve_listen(engine, server)
    server.extensions[EXTENSION_ID] = extension.settings()
    for method in sorted(TASK_METHODS):
        server.add_request_handler(method, TaskMethodParams, tasks_method_handler(engine, method))
    entry = server.get_request_handler("tools/call")
    if entry is not None:
        server.add_request_handler(
            "tools/call",
            CallToolRequestParams,
            compose_tool_call_handler([extension], entry.handler),
        )
    return extension


def mcpserver_tool_call(server: MCPServer[Any], name: str) -> ToolCall:
    """Call ``server``'s tool ``name`` without a request (a task run again after a crash or
    for a retry), answered as the SDK's own ``tools/call`` handler answers it: a JSON-RPC
    error passes through, any other failure of the tool is an error result (``isError``)."""

    async def call(arguments: Mapping[str, Any]) -> object:
        try:
            return await server.call_tool(name, dict(arguments))
        except MCPError:
            raise
        except Exception as exc:
            # The type only above DEBUG: a tool's error text may quote its arguments.
            logger.info("tool %r failed (%s)", name, type(exc).__name__, extra={"tool": name})
            logger.debug("tool %r failed: %r", name, str(exc))
            return CallToolResult(content=[TextContent(type="text", text=str(exc))], is_error=True)

    return call


def mcpserver_arguments_check(fn: Callable[..., Any], name: str) -> ArgumentsCheck:
    """The ``MCPServer``'s own validation of ``fn``'s arguments, as its tool ``name``
    (``fn`` as added to the server): the SDK's ``Tool`` built from it validates them the
    way the server's ``tools/call`` does before the body runs, without running it."""
    from mcp.server.mcpserver.tools import Tool  # noqa: PLC0415 (the server side only)

    return _validated_by(Tool.from_function(fn, name=name))


def check_arguments_on(engine: TaskEngine, server: object) -> None:
    """Check a task call's arguments as ``server`` (an ``MCPServer``) validates them, for
    its tools declared by name (``Tasks.register``); nothing for any other server (the
    low-level ``Server`` does not validate a tool's arguments)."""
    from mcp.server.mcpserver import MCPServer  # noqa: PLC0415 (only to recognise one)

    if not isinstance(server, MCPServer) or server in engine.argument_check_finders:
        return
    # A private seam (docs/architecture.md, "Argument checks"): MCPServer has no public
    # lookup of a tool by name; its own tools/call reads this same tool manager.
    tools = getattr(server, "_tool_manager", None)
    if tools is None:
        raise TypeError(
            "mcp-tasks cannot find this MCPServer's tools (MCPServer._tool_manager): "
            "this version of mcp is not one mcp-tasks supports"
        )

    def find(name: str) -> ArgumentsCheck | None:
        tool = tools.get_tool(name)
        return None if tool is None else _validated_by(tool)

    engine.argument_check_finders[server] = find


def _validated_by(tool: Tool) -> ArgumentsCheck:
    """``tool``'s own argument validation (what its ``run`` does first), as a check."""
    metadata = tool.fn_metadata

    def fits(arguments: Mapping[str, Any]) -> bool:
        try:
            metadata.validate_arguments(dict(arguments))
        except Exception:  # whatever it raises, the SDK's own run answers the call
            return False
        return True

    return fits
