"""The `mcp-tasks` command line: one module per command, wired together here."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from mcp_tasks.cli import admin, call, contract, demo, serve, stress

if TYPE_CHECKING:
    from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-tasks",
        description="Durable MCP Tasks (SEP-2663): serve, try, call and operate task stores.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    serve.add_parser(commands)
    demo.add_parser(commands)
    call.add_parser(commands)
    contract.add_parser(commands)
    stress.add_parser(commands)
    admin.add_parsers(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `mcp-tasks` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
