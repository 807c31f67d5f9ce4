"""Running an app for `serve` (over HTTP at /mcp) and `worker` (its task bodies alone): the
half of both commands that loads the SDK, imported only when one of them runs."""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import signal
import socket
import sys
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer

from mcp_tasks.adapters.asgi import (
    MCP_PATH,
    SHUTDOWN_GRACE_S,
    asgi_app,
    is_fastmcp,
    servable,
)
from mcp_tasks.adapters.listener import tcp_listener
from mcp_tasks.cli._errors import EXIT_UNREACHABLE, CLIError, UsageError, one_line
from mcp_tasks.cli._stores import check_reachable, resolve_store_url
from mcp_tasks.cli.demo_tools import demo_server
from mcp_tasks.cli.log_output import configure_logging, uvicorn_log_config
from mcp_tasks.cli.otel import configure_from_environment
from mcp_tasks.domain.errors import InvalidArgument
from mcp_tasks.runtime.gauges import TelemetryOptions
from mcp_tasks.stores.encrypted import KEYS_ENV, Keyring
from mcp_tasks.stores.opening import describe_store, store_from_url
from mcp_tasks.tasks import Tasks, tasks_served_by

if TYPE_CHECKING:
    import argparse
    from collections.abc import Awaitable, Callable, MutableMapping

    from mcp_tasks.stores.protocol import Store

    Message = MutableMapping[str, Any]


class ServeError(UsageError):
    """Why `serve` cannot serve APP as asked: one line for the user (exit 2)."""


@dataclass
class Prepared:
    """An app ready to serve and the stores its tasks really use (for the banner)."""

    app: Any
    stores: list[str]
    store_objects: list[Store] = field(default_factory=list)
    #: The Tasks of our extension the app serves (none: it serves another tasks extension).
    tasks: list[Tasks] = field(default_factory=list)


def load_object(spec: str) -> Any:
    """Import `module:attr` (the current directory is importable, as with `uvicorn`) and
    return the object."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ServeError(f"APP must be module:attr, got {spec!r}")
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        module: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name == module_name or module_name.startswith(f"{error.name}."):
            raise ServeError(
                f"no such module {error.name!r} (APP is module:attr, importable from the "
                "current directory)"
            ) from error
        raise ServeError(f"importing {module_name!r} failed: {one_line(str(error))}") from error
    except Exception as error:
        raise ServeError(
            f"importing {module_name!r} raised {type(error).__name__}: {one_line(str(error))}",
            hint="--debug shows the traceback",
        ) from error
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ServeError(f"module {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    return target


def use_encryption_keys_file(path: str | None) -> None:
    """``--encryption-keys-file``: the keys every Tasks the app builds reads
    (``$MCP_TASKS_ENCRYPTION_KEYS``), checked here so a bad file is one line.

    Raises:
        UsageError: the file cannot be read or holds no valid keys.
    """
    if path is None:
        return
    try:
        text = Path(path).read_text()
        Keyring.parse(text)
    except OSError as exc:
        raise UsageError(f"--encryption-keys-file: cannot read {path}: {exc.strerror}") from None
    except InvalidArgument as exc:
        raise UsageError(f"--encryption-keys-file {path}: {exc}") from None
    os.environ[KEYS_ENV] = text


def prepare_app(spec: str | None, store_flag: str | None) -> Prepared:
    """The server object to serve, with Tasks enabled on the store it will really use.

    Raises:
        ServeError: APP pins a store other than ``store_flag``, or does not enable tasks.
    """
    if spec is None:
        store = store_from_url(resolve_store_url(store_flag, for_serving=True))
        server = demo_server(store)
        return Prepared(server, [describe_store(store)], [store], tasks_served_by(server))
    app = load_object(spec)
    attached = [t for t in tasks_served_by(app) if t.attached]
    if attached:
        return Prepared(
            app,
            [_hand_store(t, store_flag, spec) for t in attached],
            [t.store for t in attached],
            attached,
        )
    if is_fastmcp(app):
        # FastMCP's `task=True` tools need only an extension with the tasks identifier.
        tasks = Tasks(store=resolve_store_url(store_flag, for_serving=True))
        try:
            app.add_extension(tasks.fastmcp_extension())
        except ValueError:  # FastMCP: an extension with that identifier is registered
            if store_flag is not None:
                raise ServeError(
                    f"{spec} serves tasks with an extension of its own, not mcp-tasks; "
                    "--store does not apply to it"
                ) from None
            return Prepared(app, ["the app's own tasks extension"])
        return Prepared(app, [tasks.store_description], [tasks.store], [tasks])
    if isinstance(app, MCPServer | Server):
        # Which tools are tasks is the app's own decision (tasks.tool / tasks.register).
        raise ServeError(
            f"{spec} does not enable mcp-tasks where serve can find it; see "
            "Tasks.extension() (MCPServer) or Tasks.install() (low-level Server), and serve "
            "finds them through lifespan=tasks.lifespan, tasks.tool(server) or "
            "tasks.serve_notifications(server)"
        )
    raise ServeError(f"{spec} is a {type(app).__name__}, not an MCP server")


def _hand_store(tasks: Tasks, store_flag: str | None, spec: str) -> str:
    """Give an unpinned Tasks the store serve chose; check a pinned one against --store."""
    if not tasks.store_pinned:
        tasks.use_store(resolve_store_url(store_flag, for_serving=True))
        return tasks.store_description
    pinned = tasks.store_description
    # Stores connect lazily: opening the flag's URL only to name it does no I/O.
    if store_flag is not None and describe_store(store_from_url(store_flag)) != pinned:
        raise ServeError(
            f"{spec} pins its task store to {pinned}; drop --store, or build its Tasks "
            "without a store so serve can choose it"
        )
    return pinned


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to host:port for uvicorn (bound here, so a port in use is one line).

    Raises:
        CLIError: the address cannot be bound (exit 6), naming the cause.
    """
    try:
        # Listening before the banner: whoever waits for the banner can connect at once
        # (connections queue until uvicorn accepts them).
        return tcp_listener(host, port)
    except socket.gaierror as error:  # a host that does not resolve: no port to pick
        raise CLIError(
            f"cannot listen on {host}:{port}: {one_line(str(error))}", code=EXIT_UNREACHABLE
        ) from error
    except OSError as error:
        reason = (error.strerror or str(error)).lower()
        raise CLIError(
            f"cannot listen on {host}:{port}: {reason}",
            hint="pick another --port (0: any free port), or stop what uses this one",
            code=EXIT_UNREACHABLE,
        ) from error


async def _check_task_options(spec: str, app: Any) -> None:
    """Our extension checks a FastMCP app's task options as it starts; here that is one
    line before anything listens, not a traceback from the server's lifespan."""
    from mcp_tasks.adapters.fastmcp import check_task_options  # noqa: PLC0415 (imports fastmcp)

    try:
        await check_task_options(app)
    except TypeError as error:
        raise ServeError(f"{spec}: {error}") from error


class StartupCheck:
    """The ASGI app, whose start-up (the lifespan) fails if ``refusal()`` says why once the
    app's own start-up is done: the app's lifespan is shut down again first, so it exits
    cleanly, and nothing is served. ``refused`` keeps the reason for the caller."""

    def __init__(self, app: Any, refusal: Callable[[], ServeError | None]) -> None:
        self.app = app
        self.refusal = refusal
        self.refused: ServeError | None = None

    async def __call__(
        self,
        scope: Message,
        receive: Callable[[], Awaitable[Message]],
        send: Callable[[Message], Awaitable[None]],
    ) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def checked_receive() -> Message:
            if self.refused is not None:  # the app waits to be stopped: stop it now
                return {"type": "lifespan.shutdown"}
            return await receive()

        async def checked_send(message: Message) -> None:
            if message["type"] == "lifespan.startup.complete":
                self.refused = self.refusal()
                if self.refused is not None:
                    return
            elif message["type"] == "lifespan.shutdown.complete" and self.refused is not None:
                message = {"type": "lifespan.startup.failed", "message": ""}
            await send(message)

        await self.app(scope, checked_receive, checked_send)


def _not_running(spec: str, tasks: list[Tasks]) -> ServeError | None:
    """A Tasks the app serves whose runner its server's start-up did not start."""
    if all(t.runner.running for t in tasks):
        return None
    return ServeError(
        f"{spec} does not run its tasks: its server started without entering the Tasks "
        "runner, so every task call would fail",
        hint="pass lifespan=tasks.lifespan to the server (MCPServer(..., "
        "lifespan=tasks.lifespan) or Server(..., lifespan=tasks.lifespan)), or enter "
        "`async with tasks.running():` in a lifespan of your own",
    )


class _QuietStartupFailure(logging.Filter):
    """Drops uvicorn's "Application startup failed" when serve says why itself."""

    def __init__(self, check: StartupCheck) -> None:
        super().__init__()
        self.check = check

    def filter(self, record: logging.LogRecord) -> bool:
        return self.check.refused is None or "startup failed" not in record.getMessage()


def export_store_gauges(prepared: Prepared, seconds: float | None) -> None:
    """``--store-gauges``: the app's Tasks export their store's gauges every ``seconds``."""
    if seconds is None:
        return
    try:
        telemetry = TelemetryOptions(store_gauges_s=seconds)
    except InvalidArgument as error:
        raise UsageError(f"--store-gauges: {error}") from None
    for tasks in prepared.tasks:
        tasks.telemetry = telemetry


def serve(args: argparse.Namespace) -> int:
    """`mcp-tasks serve`: serve the app (or the demo tools) until stopped."""
    configure_logging(args.log_level)  # before the app is imported: see log_output
    use_encryption_keys_file(args.encryption_keys_file)
    prepared = prepare_app(args.app, args.store)
    export_store_gauges(prepared, args.store_gauges)
    configure_from_environment()  # after the app's import: an app that set it up keeps its own
    if not servable(prepared.app):  # e.g. the module's Tasks, found beside its server
        raise ServeError(
            f"{args.app} is a {type(prepared.app).__name__}, not an MCP server; pass the "
            "server (an MCPServer, Server or FastMCP, or tasks.http_app(server))"
        )
    stores = ", ".join(dict.fromkeys(prepared.stores))
    # The fast path answers for the app's one Tasks (with several, it looks for the one
    # the server serves: TasksFastPath).
    engine = prepared.tasks[0].engine if len(prepared.tasks) == 1 else None
    banner: list[str] = []

    def started() -> ServeError | None:
        # Only our Tasks can be checked: an app served by another tasks extension runs its own.
        refusal = _not_running(args.app, prepared.tasks)
        if refusal is None:
            print(*banner, file=sys.stderr)
        return refusal

    app = StartupCheck(asgi_app(prepared.app, engine=engine, host=args.host), started)
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        log_config=uvicorn_log_config(),
        # Off by default: every tasks/get poll would be a line.
        access_log=args.access_log,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
    )
    server = uvicorn.Server(config)
    logging.getLogger("uvicorn.error").addFilter(_QuietStartupFailure(app))

    async def main() -> None:
        if prepared.tasks and is_fastmcp(prepared.app):
            await _check_task_options(args.app, prepared.app)
        # In the serving loop itself: connections the check opens stay usable.
        for store in prepared.store_objects:
            await check_reachable(store)
        with listen(args.host, args.port) as sock:
            host, port = sock.getsockname()[:2]
            shown = f"[{host}]" if ":" in host else host
            # Said once the app has started (StartupCheck): it is served from then on.
            banner.append(
                f"mcp-tasks: serving on http://{shown}:{port}{MCP_PATH} (store: {stores})"
            )
            await server.serve(sockets=[sock])

    try:
        # On the event loop uvicorn would pick for the app (`loop="auto"`: uvloop when it is
        # installed), as `uvicorn app:app` runs it.
        with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
            runner.run(main())
    except KeyboardInterrupt:
        pass  # uvicorn re-raises the Ctrl-C it handled: a normal stop
    except SystemExit:
        if server.started:
            raise
    if app.refused is not None:
        raise app.refused
    if not server.started:
        raise CLIError(
            f"could not serve on {args.host}:{args.port} (uvicorn says why above)",
            code=EXIT_UNREACHABLE,
        )
    return 0


def work(args: argparse.Namespace) -> int:
    """`mcp-tasks worker`: run the app's task bodies until SIGTERM or Ctrl-C."""
    configure_logging(args.log_level)  # before the app is imported: see log_output
    use_encryption_keys_file(args.encryption_keys_file)
    prepared = prepare_app(args.app, args.store)
    if not prepared.tasks:
        raise UsageError(f"{args.app} serves tasks with an extension of its own, not mcp-tasks")
    export_store_gauges(prepared, args.store_gauges)
    configure_from_environment()  # after the app's import: an app that set it up keeps its own
    runners = [tasks.runner for tasks in prepared.tasks]
    for runner in runners:
        # The app may be built for servers that leave the running to workers: here we run.
        runner.options = runner.options.for_worker()
    stores = ", ".join(dict.fromkeys(prepared.stores))

    async def main() -> None:
        for store in prepared.store_objects:
            await check_reachable(store)
        async with AsyncExitStack() as stack:
            for tasks in prepared.tasks:
                await stack.enter_async_context(tasks.running())
            ids = ", ".join(runner.worker_id for runner in runners)
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                # Only now: a SIGTERM from whoever waited for the banner is handled.
                print(f"mcp-tasks: worker {ids} running (store: {stores})", file=sys.stderr)
                async for received in signals:
                    name = signal.Signals(received).name
                    print(f"mcp-tasks: {name}: releasing tasks and stopping", file=sys.stderr)
                    break

    anyio.run(main)
    return 0
