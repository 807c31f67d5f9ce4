"""The ``Tasks`` facade: one Store, runner, notifier and engine, and the ways to plug them in."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import os
import typing
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio
import anyio.to_thread

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
from mcp_tasks.domain.models import DEFAULT_TTL_MS
from mcp_tasks.engine import (
    TaskEngine,
    ToolCall,
    ToolOptions,
    to_jsonrpc_error,
    tool_executor,
)
from mcp_tasks.engine.listen_slots import (
    DEFAULT_MAX_LISTEN_STREAMS,
    DEFAULT_MAX_LISTEN_STREAMS_PER_OWNER,
    DEFAULT_TOKEN_RECHECK_S,
    ListenSlots,
)
from mcp_tasks.engine.wire import DEFAULT_POLL_INTERVAL_MS
from mcp_tasks.runtime.context import TaskContext, current_task_context
from mcp_tasks.runtime.control import Deferred, TaskControl, defer, defer_slot
from mcp_tasks.runtime.gauges import gauge_interval, store_gauges
from mcp_tasks.runtime.notifier import GuardedNotifier, Notifier, NullNotifier, notifier_for
from mcp_tasks.runtime.runner import (
    DEFAULT_LEASE_MS,
    DEFAULT_MAX_ADOPTED,
    DEFAULT_REAP_INTERVAL_S,
    DEFAULT_RECOVERY_INTERVAL_S,
    Runner,
)
from mcp_tasks.stores.encrypted import Keyring, encrypting, keyring_from
from mcp_tasks.stores.memory import MemoryTaskStore
from mcp_tasks.stores.observed import observed
from mcp_tasks.stores.opening import URL_ENV, describe_store, store_from_url

if TYPE_CHECKING:
    from mcp.server.lowlevel.server import Server
    from mcp.server.mcpserver import MCPServer

    from mcp_tasks.adapters.fastmcp import FastMCPTasksExtension
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

_collectors: list[list[Tasks]] = []


class StorePinned(MCPTasksError):
    """This Tasks was built with a store of its own; another cannot replace it."""


@contextmanager
def collect_tasks() -> Iterator[list[Tasks]]:
    """Collect every :class:`Tasks` built inside the block (``mcp-tasks serve`` finds the
    Tasks of the app it imports this way, without reading any server's internals)."""
    found: list[Tasks] = []
    _collectors.append(found)
    try:
        yield found
    finally:
        _collectors.remove(found)


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

    Durable execution: ``lease_ms`` (default 30 s) is how soon another process takes over
    the tasks of a process that died, ``heartbeat_ms`` how often a running task's lease is
    renewed (default: a third of the lease, at most 10 s), ``recovery_interval_s`` (1 s)
    how often an idle process looks for such work (``None``: never; this process only runs
    the tasks it creates), and ``max_adopted`` how many of them it runs at once. A body may
    run more than once: see ``TaskContext.idempotency_key``. ``run_tasks=False``: this
    process creates tasks but runs none; ``mcp-tasks worker`` processes run them.

    ``notifier`` signals every change (bodies waiting for answers, a cancel, recovery,
    ``subscriptions/listen`` streams). Left out: the one the store's backend offers, which
    reaches every process on the store (:func:`~mcp_tasks.runtime.notifier.notifier_for`);
    ``None``: notifications off (waiters poll every 2 s); or any
    :class:`~mcp_tasks.runtime.notifier.Notifier`, e.g. one wrapping the default. Its
    failures are logged and swallowed, never raised into a request or a body.

    ``max_listen_streams`` (1,024) and ``max_listen_streams_per_owner`` (16) bound the task
    ``subscriptions/listen`` streams open in this process and per principal; past either,
    a listen is answered -32603 "Subscription limit reached" before anything is sent.
    A stream opened with a token ends (its graceful result) when the token expires, and
    when the server's token verifier, asked again every ``listen_token_recheck_s`` (30),
    refuses it.

    ``store_gauges_s``: export gauges of the store's state (tasks by status, rows against
    the row cap) from its optional ``stats()``, read in the background at most once per
    that many seconds (at least 10) and only while an exporter collects them; ``None``
    (the default): none. ``stats()`` may scan the whole table and every process counts
    the same store-wide figures, so turn it on in one process (docs/monitoring.md).

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
        default_ttl_ms: int | None = DEFAULT_TTL_MS,
        default_poll_interval_ms: int = DEFAULT_POLL_INTERVAL_MS,
        require_name_header: bool = False,
        notifier: Notifier | None = STORE_NOTIFIER,
        worker_id: str | None = None,
        lease_ms: int = DEFAULT_LEASE_MS,
        heartbeat_ms: int | None = None,
        recovery_interval_s: float | None = DEFAULT_RECOVERY_INTERVAL_S,
        max_adopted: int = DEFAULT_MAX_ADOPTED,
        reap_interval_s: float | None = DEFAULT_REAP_INTERVAL_S,
        run_tasks: bool = True,
        clock: Clock = system_clock,
        max_listen_streams: int = DEFAULT_MAX_LISTEN_STREAMS,
        max_listen_streams_per_owner: int = DEFAULT_MAX_LISTEN_STREAMS_PER_OWNER,
        listen_token_recheck_s: float = DEFAULT_TOKEN_RECHECK_S,
        store_gauges_s: float | None = None,
        encryption_keys: Keyring | str | Iterable[str] | None = None,
    ) -> None:
        #: Seconds between readings of the store's stats for its gauges (None: no gauges).
        self.store_gauges_s = gauge_interval(store_gauges_s)
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
        self.runner = Runner(
            self.observed_store,
            self.notifier,
            worker_id=worker_id,
            lease_ms=lease_ms,
            heartbeat_ms=heartbeat_ms,
            recovery_interval_s=recovery_interval_s,
            max_adopted=max_adopted,
            reap_interval_s=reap_interval_s,
            run_tasks=run_tasks,
        )
        self.engine = TaskEngine(
            self.observed_store,
            self.runner,
            self.notifier,
            default_ttl_ms=default_ttl_ms,
            default_poll_interval_ms=default_poll_interval_ms,
            require_name_header=require_name_header,
            clock=clock,
            listen_slots=ListenSlots(max_listen_streams, max_listen_streams_per_owner),
            listen_token_recheck_s=listen_token_recheck_s,
        )

        for found in _collectors:
            found.append(self)

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
                if outermost and self.store_gauges_s is not None:
                    await stack.enter_async_context(
                        store_gauges().watching(self.store, self.store_gauges_s)
                    )
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
