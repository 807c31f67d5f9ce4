"""The `mcp-tasks` command line: one module per command, wired together here.

`main` is the one error boundary: a failure the user can cause is printed as one line
(`mcp-tasks COMMAND: what went wrong`) plus at most one line of next step, with the exit
code docs/cli.md gives; `--debug` prints the traceback first.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from typing import TYPE_CHECKING, NoReturn, cast

from mcp_tasks.cli import admin, call, contract, demo, serve, stress, task, worker
from mcp_tasks.cli._errors import EXIT_INTERRUPTED, EXIT_USAGE, explain

if TYPE_CHECKING:
    from collections.abc import Sequence


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (argparse prints the whole usage first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message}\nsee `{self.prog} --help` for the usage\n")


DEBUG_HELP = "on an error, print the traceback too"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="mcp-tasks",
        description="Durable MCP Tasks (SEP-2663): serve, try, call and operate task stores.",
    )
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    # Subcommand parsers are `Parser`s too (argparse uses the parent's class).
    commands = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(dest="command", metavar="COMMAND", required=True),
    )
    serve.add_parser(commands)
    worker.add_parser(commands)
    demo.add_parser(commands)
    call.add_parser(commands)
    task.add_parsers(commands)
    contract.add_parser(commands)
    stress.add_parser(commands)
    admin.add_parsers(commands)
    for sub in commands.choices.values():
        # Also after the command (`mcp-tasks reap --debug`); unset, the global flag stands.
        sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `mcp-tasks` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        code: int = args.handler(args)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as raw:  # the boundary: expected failures are one line, bugs a traceback
        error = explain(raw)
        if error is None:
            raise
        if args.debug:
            traceback.print_exception(raw)
        print(f"mcp-tasks {args.command}: {error.message}", file=sys.stderr)
        if error.hint:
            print(error.hint, file=sys.stderr)
        return error.code
    return code


if __name__ == "__main__":
    sys.exit(main())
