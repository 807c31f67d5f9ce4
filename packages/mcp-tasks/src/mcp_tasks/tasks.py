"""The ``Tasks`` facade: one Store, runner, notifier and engine, and the ways to plug them in."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import os
import typing
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio
import anyio.to_thread

from mcp_tasks.adapters.asgi import lifespan_of, served_engines
from mcp_tasks.adapters.fast_path import with_fast_path
from mcp_tasks.adapters.sdk import (
    TasksExtension,
    check_arguments_on,
    install,
    mcpserver_arguments_check,
    mcpserver_tool_call,
    serve_listen,
)
from mcp_tasks.domain.clock import Clock, system_clock
from mcp_tasks.domain.errors import MCPTasksError
from mcp_tasks.engine import (
    TaskEngine,
    ToolCall,
    ToolOptions,
    to_jsonrpc_error,
    tool_executor,
)
from mcp_tasks.runtime.context import TaskContext, current_task_context
from mcp_tasks.runtime.control import Deferred, TaskControl, defer, defer_slot
from mcp_tasks.runtime.gauges import TelemetryOptions, store_gauges
from mcp_tasks.runtime.notifier import GuardedNotifier, Notifier, NullNotifier, notifier_for
from mcp_tasks.runtime.runner import Runner, RunnerOptions
from mcp_tasks.stores.encrypted import Keyring, encrypting, keyring_from
from mcp_tasks.stores.memory import MemoryTaskStore
from mcp_tasks.stores.observed import observed
from mcp_tasks.stores.opening import URL_ENV, describe_store, store_from_url

if TYPE_CHECKING:
    from mcp.server.lowlevel.server import Server
    from mcp.server.mcpserver import MCPServer

    from mcp_tasks.adapters.fastmcp import FastMCPTasksExtension
    from mcp_tasks.engine.options import ServingOptions
    from mcp_tasks.stores.protocol import Store

F = TypeVar("F", bound=Callable[..., Any])

logger = logging.getLogger(__name__)

#: What the start-up warning of a memory store names as the ways to a durable one.
DURABLE_HINT: Final = f"Tasks(store=...) in the app, ${URL_ENV}, or mcp-tasks serve --store URL"

#: What ``fastmcp_extension()`` says when fastmcp is not installed.
FASTMCP_MISSING: Final = 'Tasks.fastmcp_extension() needs fastmcp: pip install "mcp-tasks[fastmcp]"'

#: The task options :meth:`Tasks.register` and :meth:`Tasks.tool` take as keywords: the
#: fields of ``ToolOptions``, their one definition.
TOOL_OPTION_FIELDS: Final = frozenset(field.name for field in dataclasses.fields(ToolOptions))

#: ``Tasks(notifier=…)`` left out: the notifier the store's backend offers.
STORE_NOTIFIER: Any = object()


class StorePinned(MCPTasksError):
    """This Tasks was built with a store of its own; another cannot replace it."""


class Tasks:
    """Durable MCP Tasks for a server.

    ```python
    tasks = Tasks(store=store_from_url("sqlite:///tasks.db"))
    mcp = MCPServer("builder", extensions=[tasks.extension()], lifespan=tasks.lifespan)

    @tasks.tool(mcp, mode="optional", poll_interval_ms=500)
    async def build(ref: str, ctx: TaskContext) -> str: ...
    ```

    ``tasks.lifespan`` runs the in-process runner and the reaper. It takes any app argument,
    so it fits ``MCPServer(lifespan=…)``, ``Server(lifespan=…)`` and Starlette/FastAPI
    (``Starlette(lifespan=tasks.lifespan)``); to combine it with a lifespan of your own,
    nest ``async with tasks.running():``. Entering it twice is harmless.

    ``store`` is a :class:`~mcp_tasks.stores.protocol.Store`, a store URL (``"sqlite:///tasks.db"``,
    built with :func:`~mcp_tasks.stores.opening.store_from_url`) or ``None`` (a private
    in-memory store). Who closes it: ``close_store=True`` closes the store when the
    outermost :meth:`running` exits; ``False`` leaves it open. The default closes a store
    Tasks built from a URL and leaves a store you passed to you (you opened it, you close
    it). The in-memory default is not closed: it holds no connections, and staying open
    lets the lifespan run again (FastMCP enters it once per in-memory client). A closed
    store cannot serve a second lifespan, so a Tasks that closes its store runs once.

    How it runs, grouped by the part each option belongs to: ``runner=``
    :class:`~mcp_tasks.runtime.runner.RunnerOptions` (leases, heartbeat, recovery of the
    tasks of a process that died, reaping, ``run_tasks=False`` for a process that leaves
    the running to ``mcp-tasks worker`` processes), ``serving=``
    :class:`~mcp_tasks.engine.options.ServingOptions` (default TTL and poll interval, the
    ``Mcp-Name`` rule, the bounds on ``subscriptions/listen`` streams) and ``telemetry=``
    :class:`~mcp_tasks.runtime.gauges.TelemetryOptions` (the store's gauges). A body may
    run more than once: see ``TaskContext.idempotency_key``.

    ``notifier`` signals every change (bodies waiting for answers, a cancel, recovery,
    ``subscriptions/listen`` streams). Left out: the one the store's backend offers, which
    reaches every process on the store (:func:`~mcp_tasks.runtime.notifier.notifier_for`);
    ``None``: notifications off (waiters poll every 2 s); or any
    :class:`~mcp_tasks.runtime.notifier.Notifier`, e.g. one wrapping the default. Its
    failures are logged and swallowed, never raised into a request or a body.

    ``encryption_keys``: seal each task's user data (arguments, input requests and answers,
    result, error, status message) with AES-GCM before the store sees it
    (:class:`~mcp_tasks.stores.encrypted.EncryptedStore`): a
    :class:`~mcp_tasks.stores.encrypted.Keyring`, a string of keys (``KID:KEY`` or
    ``KEY``, comma-separated, the sealing key first) or one string per key. Left out:
    ``$MCP_TASKS_ENCRYPTION_KEYS`` when set, else none (docs/deployment.md#encryption-at-rest).
    """

    Context = TaskContext
    defer = staticmethod(defer)

    def __init__(
        self,
        store: Store | str | None = None,
        *,
        close_store: bool | None = None,
        notifier: Notifier | None = STORE_NOTIFIER,
        runner: RunnerOptions | None = None,
        serving: ServingOptions | None = None,
        telemetry: TelemetryOptions | None = None,
        clock: Clock = system_clock,
        encryption_keys: Keyring | str | Iterable[str] | None = None,
    ) -> None:
        #: What this Tasks exports beyond spans and counters (the store's gauges).
        self.telemetry = telemetry if telemetry is not None else TelemetryOptions()
        #: Whether the app chose the store itself (a Store or URL passed in).
        self.store_pinned = store is not None
        if store is None and os.environ.get(URL_ENV):
            store = os.environ[URL_ENV]
        if isinstance(store, str):
            self.store: Store = store_from_url(store)
        else:
            self.store = store if store is not None else MemoryTaskStore()
        #: The keys that seal the tasks' user data (None: stored as it is).
        self.encryption_keys = keyring_from(encryption_keys)
        #: The store observed (each operation a span), once, sealing with the keys: the
        #: engine, the runner and ``control()`` all serve from this one.
        sealing = encrypting(self.store, self.encryption_keys)
        self.observed_store = observed(sealing)
        self.close_store = isinstance(store, str) if close_store is None else close_store
        #: Whether an adapter serves this Tasks (extension(), install(), tool(), …).
        self.attached = False
        self._announced = False
        self._notifier_chosen = notifier is not STORE_NOTIFIER
        #: The notifier every part uses, guarded: its failures are logged, never raised.
        self.notifier = GuardedNotifier(self._chosen_notifier(notifier))
        self.runner = Runner(self.observed_store, self.notifier, runner)
        self.engine = TaskEngine(
            self.observed_store, self.runner, self.notifier, serving, clock=clock, facade=self
        )

    def __repr__(self) -> str:
        return f"Tasks(store={self.store!r}, close_store={self.close_store})"

    def _chosen_notifier(self, notifier: Notifier | None) -> Notifier:
        if notifier is STORE_NOTIFIER:
            return notifier_for(self.store)
        return NullNotifier() if notifier is None else notifier

    @property
    def store_description(self) -> str:
        """The store as a URL (password masked) where it has one, else its repr."""
        return describe_store(self.store)

    def use_store(self, store: Store | str, *, close_store: bool | None = None) -> None:
        """Serve from ``store`` instead: for whoever runs an app that did not pin its store.

        Call it before the app starts. The store it replaces is not closed (it was never
        used). ``close_store`` as in the constructor.

        Raises:
            StorePinned: the app built this Tasks with a store of its own.
            RuntimeError: the Tasks is already running.
        """
        if self.store_pinned:
            raise StorePinned(f"The app pins its task store to {self.store_description}")
        if self.runner.running:
            raise RuntimeError("use_store() must be called before the Tasks starts running")
        self.store = store_from_url(store) if isinstance(store, str) else store
        sealing = encrypting(self.store, self.encryption_keys)
        self.observed_store = observed(sealing)
        self.runner.serve_from(self.observed_store)
        self.engine.serve_from(self.observed_store)
        if not self._notifier_chosen:  # the old store's notifier would watch the old store
            self.notifier.guard(notifier_for(self.store))
        self.close_store = isinstance(store, str) if close_store is None else close_store
        self.store_pinned = True

    # --- lifecycle ----------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run the task runner and reaper while the context is open; then, if this Tasks
        owns its store (``close_store``), close it when the outermost entry exits."""
        outermost = not self.runner.running
        if outermost and not self._announced:
            self._announced = True
            self._announce_store()
        try:
            # The notifier listens before the runner starts and after it stops: the runner
            # publishes the leases it releases at shutdown.
            async with AsyncExitStack() as stack:
                await stack.enter_async_context(self.notifier.running())
                await stack.enter_async_context(self.runner.run())
                gauges_s = self.telemetry.store_gauges_s
                if outermost and gauges_s is not None:
                    await stack.enter_async_context(store_gauges().watching(self.store, gauges_s))
                yield
        finally:
            if outermost and self.close_store:
                # Shielded: a shutdown that is being cancelled must still free connections.
                with anyio.CancelScope(shield=True):
                    await self.store.close()

    def _announce_store(self) -> None:
        """Name the store at start-up (once per Tasks), and warn when it is in memory."""
        where = self.store_description
        logger.info("mcp-tasks: tasks are stored in %s", where)
        if isinstance(self.store, MemoryTaskStore):
            logger.warning(
                "mcp-tasks: tasks are kept in memory (%s) and are lost when this process "
                "exits; for a durable store use %s",
                where,
                DURABLE_HINT,
            )

    @asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncIterator[dict[str, Any]]:
        """A lifespan for ``MCPServer``, ``Server`` or Starlette: runs :meth:`running`, and
        on an SDK server serves task notifications on ``subscriptions/listen``."""
        self._attach(app)
        async with self.running():
            yield {}

    # --- adapters -----------------------------------------------------------------

    def extension(self) -> TasksExtension:
        """The ``MCPServer`` extension: ``MCPServer(extensions=[tasks.extension()])``."""
        self.attached = True
        return TasksExtension(self.engine)

    def http_app(self, server: MCPServer[Any] | Server[Any], **options: Any) -> Any:
        """``server.streamable_http_app(**options)`` with ``tasks/*`` polls on a fast path.

        The ASGI app to serve instead of the SDK's own: a plain ``tasks/*`` request (no
        authentication or other middleware on the app, every header valid) is answered
        without the SDK's per-request machinery, with the same bytes; every other request
        goes to the SDK's app. Also serves task notifications, as
        :meth:`serve_notifications` does. See docs/serving-tasks.md."""
        self._attach(server)
        return with_fast_path(server.streamable_http_app(**options), self.engine)

    def install(self, server: Server[Any]) -> TasksExtension:
        """Serve the extension on a low-level ``Server`` (after its ``tools/call`` handler is
        set); declare task tools with :meth:`register`."""
        self.attached = True
        return install(self.engine, server)

    def serve_notifications(self, server: MCPServer[Any] | Server[Any]) -> None:
        """Serve ``notifications.taskIds`` on ``server``'s ``subscriptions/listen``.

        Done for you by :meth:`install`, :meth:`tool` and :attr:`lifespan` (when the
        server's lifespan is this one); call it for an ``MCPServer`` that uses only
        :meth:`extension` and :meth:`register` under a lifespan of its own (it also checks
        the arguments of the tools :meth:`register` declares before they become tasks)."""
        self._attach(server)

    def _attach(self, server: object) -> None:
        """Serve task notifications on an SDK ``server`` and check its tools' arguments
        as it does; nothing for any other app."""
        serve_listen(self.engine, server)
        check_arguments_on(self.engine, server)

    def fastmcp_extension(self, *, not_rerun: Iterable[str] = ()) -> FastMCPTasksExtension:
        """The FastMCP extension: ``mcp.add_extension(tasks.fastmcp_extension())`` runs
        ``@mcp.tool(task=True)`` tools on this Store (needs the ``fastmcp`` extra).

        ``not_rerun``: names of task tools whose interrupted tasks fail instead of running
        again (``recovery="fail"`` of :meth:`register`; FastMCP's ``TaskConfig`` has no
        field for it)."""
        # Imported here: fastmcp is an optional dependency (the ``fastmcp`` extra).
        try:
            from mcp_tasks.adapters.fastmcp import FastMCPTasksExtension  # noqa: PLC0415
        except ModuleNotFoundError as error:
            if error.name != "fastmcp" and not (error.name or "").startswith("fastmcp."):
                raise
            raise ModuleNotFoundError(FASTMCP_MISSING, name=error.name) from None

        self.attached = True
        self.runner.not_rerun.update(not_rerun)
        return FastMCPTasksExtension(self.engine, self.running)

    def control(self) -> TaskControl:
        """A :class:`TaskControl` on this Store that also wakes this node's waiters."""
        return TaskControl(self.observed_store, self.notifier)

    # --- tools --------------------------------------------------------------------

    def register(self, name: str, *, run: ToolCall | None = None, **options: Any) -> ToolOptions:
        """Declare how the tool ``name`` takes part in tasks (any SDK's tool); ``options``
        are the fields of :class:`~mcp_tasks.engine.ToolOptions` (``mode``, ``ttl_ms``,
        ``poll_interval_ms``, ``preflight``, ``manual``, ``retry_delays_ms``, ``recovery``).

        ``run(arguments)`` runs the tool without a request and returns its result: with it,
        a task of this tool is run again by any process after the one running it died, and
        after a retry delay (:meth:`tool` and the FastMCP extension provide it themselves).
        Without it such a task fails ("cannot be run again"). ``retry_delays_ms``: the delay
        before each retry the body asks for (``ctx.retry(...)``); see
        :func:`~mcp_tasks.fixed_backoff` and :func:`~mcp_tasks.exponential_backoff`.
        ``recovery="fail"``: a task of this tool whose run was interrupted fails ("The task
        was interrupted; this tool is not re-run") instead of running again.

        Raises:
            TypeError: a keyword that is no field of ``ToolOptions``.
            ValueError: an option ``ToolOptions`` refuses.
        """
        return self._register(name, ToolOptions(**options), run)

    def _register(self, name: str, options: ToolOptions, run: ToolCall | None) -> ToolOptions:
        self.engine.tools[name] = options
        if options.recovery == "fail":
            self.runner.not_rerun.add(name)
        else:
            self.runner.not_rerun.discard(name)
        if run is not None:
            self.runner.executors[name] = tool_executor(run)
            self.runner.declared.discard(name)
        else:
            self.runner.declared.add(name)
        return options

    def tool(
        self, server: MCPServer[Any], *, name: str | None = None, **keywords: Any
    ) -> Callable[[F], F]:
        """Register ``fn`` as a tool of ``server`` that may run as a task.

        ``keywords`` that are fields of :class:`~mcp_tasks.engine.ToolOptions` are the
        tool's task options, as in :meth:`register`; the others go to the server's
        ``add_tool`` (``description=``, ``title=``, ...). A parameter annotated
        :class:`TaskContext` receives the task's context. ``mode`` is ``"forbidden"``,
        ``"optional"``, ``"required"`` or ``callable(arguments, request)``.
        ``manual=True`` runs the function inline: it returns :func:`defer` to make a task.
        A task of this tool survives the process running it: another process runs it again
        (at least once, never in parallel).
        """
        options = ToolOptions(**{k: v for k, v in keywords.items() if k in TOOL_OPTION_FIELDS})
        tool_kwargs = {k: v for k, v in keywords.items() if k not in TOOL_OPTION_FIELDS}
        self._attach(server)

        def decorator(fn: F) -> F:
            tool_name = name or fn.__name__
            body = with_task_context(fn, manual=options.manual)
            server.add_tool(body, name=tool_name, **tool_kwargs)
            run = None if options.manual else mcpserver_tool_call(server, tool_name)
            self._register(tool_name, options, run)
            self.engine.argument_checks[tool_name] = mcpserver_arguments_check(body, tool_name)
            return fn

        return decorator


def tasks_served_by(app: object) -> list[Tasks]:
    """The :class:`Tasks` ``app`` serves, each once: those whose adapters its server holds
    (:meth:`Tasks.install`, :meth:`Tasks.tool`, :meth:`Tasks.serve_notifications`,
    :meth:`Tasks.http_app`, :meth:`Tasks.fastmcp_extension`, also behind a Starlette app's
    routes) and the one whose :meth:`Tasks.lifespan` is its lifespan; ``app`` itself when
    it is a Tasks. How ``mcp-tasks serve`` finds them, from the app's public parts alone
    (an ``MCPServer`` keeps its extensions to itself: one that only has
    :meth:`Tasks.extension` and :meth:`Tasks.register` is found through its lifespan or
    :meth:`Tasks.serve_notifications`)."""
    found: list[object] = [app]
    found += (engine.facade for engine in served_engines(app))
    lifespan = lifespan_of(app)
    if inspect.ismethod(lifespan):  # a bound Tasks.lifespan
        found.append(lifespan.__self__)
    return list({id(t): t for t in found if isinstance(t, Tasks)}.values())


def _is_task_context(annotation: object) -> bool:
    """``TaskContext`` itself, a subclass, or an optional/union that includes one."""
    if inspect.isclass(annotation):
        return issubclass(annotation, TaskContext)
    return any(_is_task_context(arg) for arg in typing.get_args(annotation))


def with_task_context(fn: Callable[..., Any], *, manual: bool = False) -> Callable[..., Any]:
    """``fn`` with its :class:`TaskContext` parameters filled from the running task (or an
    inline context for a synchronous call) and hidden from the tool's input schema."""
    hints = typing.get_type_hints(fn, include_extras=True)
    signature = inspect.signature(fn)
    injected = [p for p, a in hints.items() if p != "return" and _is_task_context(a)]
    parameters = [
        p.replace(annotation=hints.get(p.name, p.annotation))
        for p in signature.parameters.values()
        if p.name not in injected
    ]
    returns = (
        inspect.Signature.empty if manual else hints.get("return", signature.return_annotation)
    )

    @functools.wraps(fn)
    async def wrapper(**kwargs: Any) -> Any:
        context = current_task_context() or TaskContext(arguments=kwargs)
        for parameter in injected:
            kwargs[parameter] = context
        try:
            if inspect.iscoroutinefunction(fn):
                result = await fn(**kwargs)
            else:  # a plain function must not block the event loop (contextvars carry over)
                result = await anyio.to_thread.run_sync(functools.partial(fn, **kwargs))
                if inspect.isawaitable(result):
                    result = await result
        except MCPTasksError as error:
            # The SDK passes JSON-RPC errors through and turns anything else into a tool
            # error: a task error the body did not handle answers as JSON-RPC.
            raise to_jsonrpc_error(error) from None
        if isinstance(result, Deferred):
            slot = defer_slot.get()
            if slot is None:
                raise RuntimeError("defer() is only valid from a tool registered with manual=True")
            slot.deferred = result
            return "deferred"
        return result

    del wrapper.__wrapped__  # the SDK must read our signature, not fn's
    wrapper.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=parameters, return_annotation=returns
    )
    wrapper.__annotations__ = {
        p.name: p.annotation for p in parameters if p.annotation is not inspect.Parameter.empty
    }
    if returns is not inspect.Signature.empty:
        wrapper.__annotations__["return"] = returns
    return wrapper
