"""`mcp-tasks worker [APP]`: run the task bodies of an app without serving HTTP.

A worker claims the tasks nobody holds on the app's store (oldest first): tasks whose
process died or stopped, retries that are due, and tasks created by servers that do not run
them (``Tasks(run_tasks=False)``). It runs each through its tool, exactly as the server
would. Any number of workers and servers can share one store.
"""

from __future__ import annotations

import signal
import sys
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

import anyio

from mcp_tasks.cli._errors import UsageError
from mcp_tasks.cli._stores import check_reachable
from mcp_tasks.cli.otel import configure_from_environment
from mcp_tasks.cli.serve import app_parser, prepare_app
from mcp_tasks.runtime.runner import DEFAULT_RECOVERY_INTERVAL_S

if TYPE_CHECKING:
    import argparse

DESCRIPTION = """Run the task bodies of APP (module:attr, as for `serve`; no APP: the demo
tools) on its store, without serving HTTP: work whose process died or stopped, retries that
are due, and tasks created by servers built with Tasks(run_tasks=False). The store is
chosen as for `serve` (--store, else $MCP_TASKS_STORE_URL, else sqlite:///./mcp-tasks.db).

Spans and metrics: set up from the standard OTEL_* variables as for `serve`.

SIGTERM or Ctrl-C stops it cleanly: running bodies are cancelled and their tasks released,
so another worker or server takes them over at once. A store it cannot reach is refused
(exit 6)."""


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = app_parser(
        commands,
        "worker",
        help="run an app's task bodies without serving HTTP",
        description=DESCRIPTION,
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    prepared = prepare_app(args.app, args.store)
    if not prepared.tasks:
        raise UsageError(f"{args.app} serves tasks with an extension of its own, not mcp-tasks")
    configure_from_environment()  # after the app's import: an app that set it up keeps its own
    runners = [tasks.runner for tasks in prepared.tasks]
    for runner in runners:
        # The app may be built for servers that leave the running to workers: here we run.
        runner.run_tasks = True
        if runner.recovery_interval_s is None:
            runner.recovery_interval_s = DEFAULT_RECOVERY_INTERVAL_S
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
