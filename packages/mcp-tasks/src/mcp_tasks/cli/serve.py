"""`mcp-tasks serve [APP]`: serve an app (or the demo tools) with Tasks over HTTP at /mcp.

Only the command line is defined here: `serving` (the SDK) is imported when serve runs, so
`--help` and usage errors answer at once.
"""

from __future__ import annotations

import argparse
from typing import Final

#: The choices of `--log-level` (uvicorn's names), for serve and worker.
LOG_LEVELS: Final = ("critical", "error", "warning", "info", "debug")
DEFAULT_LOG_LEVEL: Final = "info"

DESCRIPTION = """Serve APP (module:attr naming an MCPServer, a low-level Server, a FastMCP server,
or the app `tasks.http_app(server)` returns) or, with no APP, the built-in demo tools (build,
deploy, sleep), over Streamable HTTP at /mcp.

The store: an app whose Tasks has no store of its own (`Tasks()`) is handed the --store
store (default: $MCP_TASKS_STORE_URL, else sqlite:///./mcp-tasks.db). An app that pins its
store (`Tasks(store=...)`) keeps it; serve refuses a different --store. A FastMCP app whose
`task=True` tools have no tasks extension gets ours. The banner names the store served.

Spans and metrics: with mcp-tasks[otel] installed, OTEL_TRACES_EXPORTER,
OTEL_METRICS_EXPORTER (`prometheus`: a scrape endpoint on OTEL_EXPORTER_PROMETHEUS_PORT,
default 9464) and the other standard OTEL_* variables set OpenTelemetry up
(docs/monitoring.md).

Before listening, serve reads each store once; a store it cannot reach is refused
(exit 6). A malformed APP, --store or --port is a usage error (exit 2)."""


def port_number(text: str) -> int:
    """An argparse type: a TCP port, 0 (any free port) to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, got {value}")
    return value


def app_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    *,
    help: str,
    description: str,
) -> argparse.ArgumentParser:
    """A command that loads APP on a store as `serve` does (`serve`, `worker`)."""
    parser = commands.add_parser(
        name,
        help=help,
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("app", nargs="?", metavar="APP", help="module:attr of the server")
    parser.add_argument(
        "--store",
        metavar="URL",
        help="store URL (default: $MCP_TASKS_STORE_URL or sqlite:///./mcp-tasks.db)",
    )
    parser.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default=DEFAULT_LOG_LEVEL,
        help=f"the least severe log lines printed (default {DEFAULT_LOG_LEVEL}: the store at "
        "start-up, tasks resumed, store outages)",
    )
    parser.add_argument(
        "--encryption-keys-file",
        metavar="FILE",
        help="seal the tasks' user data with the keys in FILE (KID:KEY or KEY, one per line, "
        "the sealing key first; `mcp-tasks keygen` makes one), for every Tasks of the app "
        "that names no keys of its own (default: $MCP_TASKS_ENCRYPTION_KEYS, else none)",
    )
    parser.add_argument(
        "--store-gauges",
        type=float,
        metavar="SECONDS",
        help="export gauges of the store's tasks by status and rows against the cap, read "
        "from its stats at most every SECONDS (at least 10) while a metrics exporter "
        "collects; one process per store is enough (default: off)",
    )
    return parser


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = app_parser(
        commands,
        "serve",
        help="serve an app (or the demo tools) with Tasks over Streamable HTTP",
        description=DESCRIPTION,
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=port_number, default=8000, help="port, 0 to 65535 (default 8000)"
    )
    parser.add_argument(
        "--access-log",
        action="store_true",
        help="log every HTTP request, one line each (default off: every poll is a request)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from mcp_tasks.cli.serving import serve  # noqa: PLC0415 (help must not wait for the SDK)

    return serve(args)
