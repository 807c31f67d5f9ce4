"""FastMCP adapter: `mcp.add_extension(tasks.fastmcp_extension())` runs FastMCP's own
`@mcp.tool(task=True)` / `TaskConfig(mode=…)` tools as SEP-2663 tasks on any of our Stores.

FastMCP only checks that *an* extension with the tasks identifier is registered, so this
one takes the place of `fastmcp-tasks` (Docket). A task body can report progress and ask
for input through `mcp_tasks.current_task_context()`; FastMCP's own `ctx.report_progress`
and `ctx.elicit` speak to the (finished) request, not to the task.

Importing this module imports `fastmcp` (the `mcp-tasks[fastmcp]` extra).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

import mcp_types as types
from fastmcp.exceptions import FastMCPError
from fastmcp.server.dependencies import without_injected_parameters
from fastmcp.server.extensions import MethodBinding, ServerExtension
from fastmcp.server.providers.fastmcp_provider import FastMCPProviderTool
from fastmcp.tools.base import ToolResult
from fastmcp.tools.function_tool import FunctionTool
from fastmcp.utilities.versions import VersionSpec
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolRequestParams
from pydantic import BaseModel
from pydantic.experimental.arguments_schema import generate_arguments_schema
from pydantic_core import ArgsKwargs, SchemaValidator, to_json

from mcp_tasks.adapters.listen_middleware import serve_task_notifications
from mcp_tasks.adapters.tasks_methods import (
    http_headers,
    request_view,
    tasks_method_bindings,
    view_of,
)
from mcp_tasks.domain.errors import MCPTasksError
from mcp_tasks.engine import (
    EXTENSION_ID,
    ArgumentsCheck,
    TaskMode,
    ToolOptions,
    result_to_change,
    to_jsonrpc_error,
    tool_executor,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence

    from fastmcp import FastMCP
    from fastmcp.server.context import Context
    from fastmcp.server.extensions import ToolCallContinuation, ToolCallOutcome
    from fastmcp.tools.base import Tool

    from mcp_tasks.domain.models import StatusChange
    from mcp_tasks.engine import TaskEngine
    from mcp_tasks.runtime.runner import Body

    #: What runs the runner and reaper while the server lives (``Tasks.running``).
    Running = Callable[[], AbstractAsyncContextManager[None]]

__all__ = ["FastMCPTasksExtension", "tool_options"]

logger = logging.getLogger(__name__)


def tool_options(tool: Tool) -> ToolOptions | None:
    """Our options for a FastMCP tool from its `TaskConfig`; `None` when it is not a task tool."""
    config = tool.task_config
    if config.mode not in ("forbidden", "optional", "required"):
        raise TypeError(
            f"Tool {tool.name!r}: TaskConfig.mode must be 'forbidden', 'optional' or "
            f"'required', got {config.mode!r}"
        )
    if not config.supports_tasks():
        return None
    if not isinstance(config.poll_interval, timedelta):
        raise TypeError(
            f"Tool {tool.name!r}: TaskConfig.poll_interval must be a datetime.timedelta "
            f"(e.g. timedelta(seconds=0.5)), got {type(config.poll_interval).__name__} "
            f"{config.poll_interval!r}"
        )
    interval_ms = int(config.poll_interval.total_seconds() * 1000)
    return ToolOptions(mode=TaskMode(config.mode), poll_interval_ms=max(interval_ms, 1))


@functools.lru_cache(maxsize=1024)
def _arguments_validator(fn: Callable[..., Any]) -> SchemaValidator:
    """What FastMCP's run of ``fn`` validates its arguments with (the parameters it does not
    inject), without the call it makes once they pass."""
    supplied = set(inspect.signature(without_injected_parameters(fn)).parameters)
    return SchemaValidator(
        generate_arguments_schema(
            fn,
            schema_type="arguments",
            parameters_callback=lambda _i, name, _a: None if name in supplied else "skip",
        )
    )


async def validating_tool(tool: Tool, server: FastMCP) -> tuple[Tool, FastMCP]:
    """The tool whose run validates ``tool``'s arguments and the server it runs on (whose
    ``strict_input_validation`` applies): for a tool of a mounted server, the mounted
    server's own tool (its ``call_tool`` runs it), else ``tool`` on ``server``."""
    # A private seam (docs/architecture.md, "Argument checks"): a mounted tool keeps its
    # server and name only in private attributes, with no public way from the wrapper to
    # the tool it delegates to; if a FastMCP release drops them the call fails loudly.
    while isinstance(tool, FastMCPProviderTool):
        child: FastMCP = tool._server
        version = VersionSpec(eq=tool.version) if tool.version else None
        inner = await child.get_tool(tool._original_name or tool.name, version=version)
        if inner is None:
            break
        tool, server = inner, child
    return tool, server


def arguments_check(tool: Tool, server: FastMCP) -> ArgumentsCheck | None:
    """FastMCP's own validation of ``tool``'s arguments (see :func:`validating_tool`), run
    before a task is created; ``None`` for a tool that is not a plain function (a proxied
    or transformed tool, a ``Tool`` subclass: its run validates as it goes)."""
    if not isinstance(tool, FunctionTool):
        return None
    try:
        validator = _arguments_validator(tool.fn)
    except Exception:  # a callable pydantic cannot read: FastMCP's run decides as it goes
        logger.debug("tool %r: no argument check before its tasks", tool.name, exc_info=True)
        return None

    strict = server.strict_input_validation

    def fits(arguments: Mapping[str, Any]) -> bool:
        try:
            if strict:  # as FastMCP: strict JSON-mode validation of JSON arguments
                validator.validate_json(to_json(dict(arguments)), strict=True)
            else:
                validator.validate_python(ArgsKwargs((), dict(arguments)))
        except ValueError:  # pydantic's ValidationError
            return False
        return True

    return fits


@asynccontextmanager
async def _checked_then(
    server: FastMCP | None, running: AbstractAsyncContextManager[None]
) -> AsyncIterator[None]:
    """Check every tool's task options before the server starts, then run ``running``."""
    if server is not None:
        await check_task_options(server)
    async with running:
        yield


async def check_task_options(server: FastMCP) -> None:
    """Check every tool's task options as :func:`tool_options` reads them.

    Raises:
        TypeError: a tool's ``TaskConfig`` field has the wrong type or value (the message
            names the tool and the field).
    """
    for tool in await server.list_tools(run_middleware=False):
        tool_options(tool)


def _as_call_tool_result(outcome: object) -> object:
    """A FastMCP `ToolResult` as the `CallToolResult` the wire would have carried."""
    if not isinstance(outcome, ToolResult):
        return outcome
    converted = outcome.to_mcp_result()
    if isinstance(converted, types.CallToolResult):
        return converted
    if isinstance(converted, tuple):
        content, structured = converted
        return types.CallToolResult(content=content, structured_content=structured)
    return types.CallToolResult(content=converted)


def fastmcp_result_to_change(outcome: object) -> StatusChange:
    """How a FastMCP tool's outcome ends its task (a `ToolResult`, or an error result)."""
    return result_to_change(_as_call_tool_result(outcome))


async def _as_task_outcome(call: Callable[[], Awaitable[object]]) -> object:
    """Run a FastMCP tool inside a task. FastMCP turns a tool's own error into an error
    result only after the interceptors; inside a task it must become `completed` +
    `isError` here. A task error the tool did not handle (e.g. input the client lacks)
    fails the task as the JSON-RPC error it maps to, and so does an `MCPError` the tool
    raised (FastMCP wraps it in a `ToolError`): a protocol error ends the task `failed`."""
    try:
        return await call()
    except FastMCPError as error:
        if isinstance(error.__cause__, MCPTasksError):
            raise to_jsonrpc_error(error.__cause__) from None
        if isinstance(error.__cause__, MCPError):
            raise error.__cause__ from None
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=str(error))], is_error=True
        )


class FastMCPTasksExtension(ServerExtension):
    """`io.modelcontextprotocol/tasks` for FastMCP: an engine (Store, runner) and what runs
    its runner (`Tasks.fastmcp_extension()` builds one from a `Tasks`)."""

    identifier = EXTENSION_ID

    def __init__(self, engine: TaskEngine, running: Running) -> None:
        self._engine = engine
        self._running = running
        # A task of a tool of the server this extension is bound to runs again (after a
        # crash, for a retry) through that server, found when the task is recovered.
        engine.runner.resolvers.append(self._executor)
        engine.runner.listers.append(self._task_tools)

    async def _task_tools(self) -> frozenset[str]:
        """The names of the bound server's task tools: what ``_executor`` finds."""
        ref = self._server_ref
        server = ref() if ref is not None else None
        if server is None:
            return frozenset()
        tools = await server.list_tools(run_middleware=False)
        return frozenset(tool.name for tool in tools if tool_options(tool) is not None)

    async def _executor(self, name: str) -> Body | None:
        """The executor of the bound server's task tool ``name`` (``None``: not ours)."""
        ref = self._server_ref
        server = ref() if ref is not None else None
        if server is None:
            return None
        tool = await server.get_tool(name)
        if tool is None or tool_options(tool) is None:
            return None

        async def call(arguments: Mapping[str, Any]) -> object:
            # No middleware: it ran on the call that created the task, and it reads the
            # request, which is long gone.
            return await _as_task_outcome(
                lambda: server.call_tool(name, dict(arguments), run_middleware=False)
            )

        return tool_executor(call, fastmcp_result_to_change)

    def __repr__(self) -> str:
        return f"FastMCPTasksExtension({self._engine!r})"

    @property
    def engine(self) -> TaskEngine:
        """The engine this extension serves."""
        return self._engine

    def clone(self) -> FastMCPTasksExtension:
        # The Store and runner are shared state, never deep-copied.
        return FastMCPTasksExtension(self._engine, self._running)

    def settings(self) -> dict[str, Any]:
        return {}  # the extension defines no settings: an empty object means support

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        """Serve ``taskIds`` on ``subscriptions/listen`` and run the task runner and reaper
        while the server lives."""
        server = self._serve_notifications()
        return _checked_then(server, _running_in_own_task(self._running))

    def methods(self) -> Sequence[MethodBinding]:
        # FastMCP asks for the methods once it bound this extension to its server: from
        # then on the server's SDK chain holds our middleware, which is also how
        # `mcp-tasks serve` finds the Tasks of a FastMCP app (adapters.asgi.served_engines).
        self._serve_notifications()
        return tasks_method_bindings(self._engine, MethodBinding)

    def _serve_notifications(self) -> FastMCP | None:
        """Serve ``taskIds`` on the bound server's ``subscriptions/listen`` (once); the
        server, or ``None`` when unbound (entered by hand: there is no listen to serve)."""
        ref = self._server_ref
        server = ref() if ref is not None else None
        if server is not None:
            # FastMCP's auth provider is its token verifier (None: no auth).
            verifier = server.auth
            serve_task_notifications(self._engine, sdk_server_of(server), view_of, verifier)
        return server

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        context: Context,
        call_next: ToolCallContinuation,
    ) -> ToolCallOutcome:
        rc = context.request_context
        tool = await context.fastmcp.get_tool(params.name)
        options = tool_options(tool) if tool is not None else None
        if rc is None or tool is None or options is None:
            return await call_next()

        async def run_tool() -> object:
            return await _as_task_outcome(call_next)

        result = await self._engine.handle_tool_call(
            request_view(rc.meta, rc.protocol_version, http_headers(rc.request)),
            name=params.name,
            arguments=params.arguments,
            input_responses=_input_responses(params),
            call_next=run_tool,
            options=options,
            to_change=fastmcp_result_to_change,
            arguments_fit=arguments_check(*await validating_tool(tool, context.fastmcp)),
        )
        if isinstance(result, dict):
            # A CreateTaskResult. The SDK runner serializes a dict as is: a model would be
            # dumped with exclude_none and lose the required `ttlMs: null`.
            return cast("BaseModel", result)
        return cast("ToolCallOutcome", _as_tool_result(result))


def sdk_server_of(server: FastMCP) -> Server[Any]:
    """The SDK's low-level ``Server`` under a FastMCP server, whose middleware chain serves
    ``taskIds`` on ``subscriptions/listen``.

    Private seam: FastMCP (4.1.4 to 4.1.6) keeps it as ``FastMCP._mcp_server`` (its
    ``LowLevelServer``, a subclass of the SDK's ``Server``) and offers neither a public
    accessor nor a way for an extension to add SDK middleware, and its ``MethodBinding``
    refuses a spec method such as ``subscriptions/listen``. This is the one place that
    reads it; if FastMCP renames it, serving fails loudly here. See docs/architecture.md,
    "Status notifications: the SDK seam".
    """
    lowlevel = getattr(server, "_mcp_server", None)
    if not isinstance(lowlevel, Server):
        raise TypeError(
            f"{type(server).__name__} keeps no SDK Server as _mcp_server: this FastMCP "
            "version is not supported by mcp-tasks' FastMCP adapter"
        )
    return lowlevel


def _input_responses(params: CallToolRequestParams) -> dict[str, Any] | None:
    """The retry's answers to an input round, as the JSON they arrived as (the engine keeps
    them with a task's work, and an inline body reads them by key)."""
    if params.input_responses is None:
        return None
    return {
        key: answer.model_dump(by_alias=True, mode="json", exclude_none=True)
        if isinstance(answer, BaseModel)
        else answer
        for key, answer in params.input_responses.items()
    }


@asynccontextmanager
async def _running_in_own_task(running: Running) -> AsyncIterator[None]:
    """`running()` (the runner and reaper), entered and exited in an asyncio task of its own.

    Why: FastMCP (4.1.4 to 4.1.6, `LifespanMixin._lifespan_manager`) exits extension
    lifespans from an `AsyncExitStack` inside a shielding cancel scope it opens at shutdown,
    and it offers no other hook (its user lifespan and provider lifespans sit in the same
    stack). The runner's task group cannot be exited there: anyio requires cancel scopes to
    close in the order they opened. A dedicated task owns the group instead, as FastMCP's
    own ASGI transport does for lifespans. Guarantees: a failure to start raises here; a
    runner that dies while serving is logged at once and re-raised at shutdown; shutdown
    waits for the owner, so bodies are stopped and their leases released (and an owned
    store closed) before the lifespan returns, even if the exit itself is cancelled.
    """
    started, stop = asyncio.Event(), asyncio.Event()

    async def own() -> None:
        async with running():
            started.set()
            await stop.wait()

    def report_early_end(task: asyncio.Task[None]) -> None:
        if not stop.is_set() and not task.cancelled() and task.exception() is not None:
            logger.error("the task runner stopped while serving", exc_info=task.exception())

    owner = asyncio.create_task(own(), name="mcp-tasks runner")
    try:
        waiter = asyncio.create_task(started.wait())
        try:
            await asyncio.wait({owner, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if not started.is_set():
            await owner  # it failed to start: raise its error here
        owner.add_done_callback(report_early_end)
        yield
    finally:
        stop.set()
        await _wait_for(owner)


async def _wait_for(owner: asyncio.Task[None]) -> None:
    """Wait until `owner` ends and raise its error; if we are cancelled meanwhile, still let
    it finish (it is releasing leases) before passing the cancellation on."""
    try:
        await asyncio.shield(owner)
    except asyncio.CancelledError:
        if not owner.done():
            await asyncio.wait({owner})
        if not owner.cancelled() and owner.exception() is not None:
            logger.error("the task runner failed to stop", exc_info=owner.exception())
        raise


def _as_tool_result(result: object) -> object:
    """A synchronous answer back in FastMCP's own vocabulary for the rest of its chain."""
    if isinstance(result, types.CallToolResult):
        return ToolResult(
            content=result.content,
            structured_content=result.structured_content,
            meta=result.meta,
            is_error=result.is_error,
        )
    return result
