"""`mcp-tasks call URL TOOL [key=value …]`: call a tool as a tasks-aware client and follow it.

Exit codes: 0 completed; 1 completed with `isError: true`; 2 a usage error (a malformed
`key=value`, or an `--answer` the wire cannot carry); 3 failed (JSON-RPC error); 4
cancelled; 5 input required and no answer here (the task is left waiting); 6 the call
itself failed (connection, protocol error, the server gone for longer than
`--reconnect-for`).

The task id goes to stderr as soon as there is one, so the task can be found again
(`mcp-tasks get | watch | cancel URL ID`); it is a bearer capability, so it is printed only
to the user running this command, never logged.
"""

from __future__ import annotations

import argparse
from urllib.parse import urlsplit

from mcp_tasks.cli.client_args import (
    ANSWER_HELP,
    RECONNECT_FOR_S,
    parse_answers,
    parse_pairs,
)

EPILOG = f"""exit codes: 0 completed, 1 completed with isError, 3 failed, 4 cancelled,
5 input required and not answered here (the task waits; the watch line to answer it is
printed), 6 the call failed (connection/protocol, or the server or its task store was
gone for more than --reconnect-for, default {RECONNECT_FOR_S:g} s), 2 usage (a URL that
is not http(s)://, a negative --reconnect-for), 130 interrupted (the task is cancelled
first)"""


def server_url(text: str) -> str:
    """The `URL` argument: an http(s) URL with a host (checked before connecting, so a
    mistyped one is a usage error, exit 2)."""
    parts = urlsplit(text)
    if parts.scheme in {"http", "https"} and parts.hostname:
        return text
    example = f"http://{text}" if "://" not in text else "http://127.0.0.1:8000/mcp"
    if "://" not in text and "/" not in text:
        example += "/mcp"
    raise argparse.ArgumentTypeError(
        f"{text!r} is not a server URL (http:// or https://, with a host); e.g. {example}"
    )


def seconds(text: str) -> float:
    """A duration of zero or more seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0 or value == float("inf"):  # `not >=` also refuses nan
        raise argparse.ArgumentTypeError(f"{text!r}: give 0 or more seconds")
    return value


def add_url_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", type=server_url, help="server URL, e.g. http://127.0.0.1:8000/mcp")


def add_reconnect_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--reconnect-for",
        type=seconds,
        default=RECONNECT_FOR_S,
        metavar="SECONDS",
        help="when the server goes away (or its task store does) while following the task, "
        f"keep trying this long (default {RECONNECT_FOR_S:g}; 0: give up at once)",
    )


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "call",
        help="call a tool, follow its task, answer input prompts, print the result",
        description="Call TOOL on the Streamable HTTP server at URL, declaring tasks support.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_url_argument(parser)
    parser.add_argument("tool", help="tool name")
    parser.add_argument(
        "arguments",
        nargs="*",
        default=[],  # without a default argparse counts a "*" positional as required
        metavar="key=value",
        help="tool arguments; values are JSON when they parse, else strings",
    )
    parser.add_argument(
        "--answer", action="append", default=[], metavar="KEY=JSON", help=ANSWER_HELP
    )
    parser.add_argument(
        "--no-input",
        action="store_true",
        help="never prompt; input nobody answered exits 5 and leaves the task waiting",
    )
    parser.add_argument("--json", action="store_true", help="print the final result as JSON")
    add_reconnect_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Check the arguments and answers, then call (the client side is imported only now)."""
    answers = parse_answers(args.answer)
    arguments = parse_pairs(args.arguments, "an argument")
    from mcp_tasks.cli import follow  # noqa: PLC0415 (a usage error must not wait for the SDK)

    return follow.run_call(args, arguments, answers)
