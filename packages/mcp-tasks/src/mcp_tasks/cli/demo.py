"""`mcp-tasks demo`: a self-contained tour of tasks over real HTTP, in one process.

It serves the demo tools on a free 127.0.0.1 port from the embedded default store (a SQLite
file in a temporary folder, removed afterwards; ``memory://`` when the SQLite store is not
installed) or from ``--store URL``, then drives them with the tasks client: live progress,
an input prompt answered automatically, and a cancellation. Exit 0 when every step ended as
expected.

Only the command line is defined here: the tour (`tour`, the SDK) is imported when it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    summary = "a self-contained tour: progress, an input prompt, a cancellation (exits 0)"
    parser = commands.add_parser("demo", help=summary, description=summary)
    parser.add_argument(
        "--store",
        metavar="URL",
        help="run the tour on this store (default: a SQLite file in a temporary folder)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from mcp_tasks.cli.tour import run_tour  # noqa: PLC0415 (help must not wait for the SDK)

    return run_tour(args)
