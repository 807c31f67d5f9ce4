"""`mcp-tasks worker [APP]`: run the task bodies of an app without serving HTTP.

A worker claims the tasks nobody holds on the app's store (oldest first): tasks whose
process died or stopped, retries that are due, and tasks created by servers that do not run
them (``RunnerOptions(run_tasks=False)``). It runs each through its tool, exactly as the server
would. Any number of workers and servers can share one store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp_tasks.cli.serve import app_parser

if TYPE_CHECKING:
    import argparse

DESCRIPTION = """Run the task bodies of APP (module:attr, as for `serve`; no APP: the demo
tools) on its store, without serving HTTP: work whose process died or stopped, retries that
are due, and tasks created by servers built with RunnerOptions(run_tasks=False). The store is
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
    from mcp_tasks.cli.serving import work  # noqa: PLC0415 (help must not wait for the SDK)

    return work(args)
