"""The `mcp-tasks` command line: one module per command, wired together here.

`main` is the one error boundary: a failure the user can cause is printed as one line
(`mcp-tasks COMMAND: what went wrong`) plus at most one line of next step, with the exit
code docs/cli.md gives; `--debug` prints the traceback first.

Only the module of the command being run is imported (the others are listed by name and
summary), so `--help` and usage errors answer at once and a client command never loads the
server side.

The developer commands `contract` and `stress` belong to the contract distribution
(`mcp-tasks-contract`), which adds them through the entry-point group
:data:`COMMANDS_GROUP` (:mod:`mcp_tasks.cli.kit` says what such a command may use);
without it they are listed all the same, and running one says how to install it (exit 2).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Final, NoReturn, cast

from mcp_tasks.cli._errors import EXIT_INTERRUPTED, EXIT_USAGE, explain

if TYPE_CHECKING:
    from collections.abc import Sequence

#: The entry-point group of commands other distributions add: the command's name, the
#: module that defines its parser (``add_parsers``) and runs it.
COMMANDS_GROUP: Final = "mcp_tasks.commands"
#: The module of a command listed below that another distribution adds (:data:`COMMANDS_GROUP`).
PLUGGED: Final = "<entry point>"
#: How to install the commands listed below as :data:`PLUGGED`.
PLUGGED_INSTALL: Final = "pip install mcp-tasks-contract"

# Every command: the module that defines its parser and runs it, and its one-line summary
# for `mcp-tasks --help` (the module's own parser repeats it; a test keeps them equal).
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": (
        "mcp_tasks.cli.serve",
        "serve an app (or the demo tools) with Tasks over Streamable HTTP",
    ),
    "worker": ("mcp_tasks.cli.worker", "run an app's task bodies without serving HTTP"),
    "demo": (
        "mcp_tasks.cli.demo",
        "a self-contained tour: progress, an input prompt, a cancellation (exits 0)",
    ),
    "call": (
        "mcp_tasks.cli.call",
        "call a tool, follow its task, answer input prompts, print the result",
    ),
    "get": ("mcp_tasks.cli.task", "print a task's current state (tasks/get)"),
    "watch": (
        "mcp_tasks.cli.task",
        "follow a task to its end, answering input; print its result",
    ),
    "cancel": ("mcp_tasks.cli.task", "cancel a task (tasks/cancel) and print what it is then"),
    "contract": (
        PLUGGED,
        "run the Store contract suite against a store URL or module:factory",
    ),
    "stress": (
        PLUGGED,
        "run a deterministic concurrent workload on a store; check exact invariants",
    ),
    "migrate": (
        "mcp_tasks.cli.admin",
        "create the store's schema and indexes if missing; says whether it created them",
    ),
    "reap": ("mcp_tasks.cli.admin", "delete expired tasks once and print how many"),
    "doctor": (
        "mcp_tasks.cli.admin",
        "check the store: a read, a write of one probe task, its operations; "
        "prints what it checked and what it changed",
    ),
    "rekey": (
        "mcp_tasks.cli.rekey",
        "re-seal every task of a store under the first encryption key, in batches",
    ),
    "keygen": (
        "mcp_tasks.cli.rekey",
        "print a new encryption key (KID:KEY) for MCP_TASKS_ENCRYPTION_KEYS",
    ),
    "stats": (
        "mcp_tasks.cli.stats",
        "count a store's tasks by status, lease, retry, expiry and cap; writes nothing",
    ),
}


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (argparse prints the whole usage first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message}\nsee `{self.prog} --help` for the usage\n")


DEBUG_HELP = "on an error, print the traceback too"


def chosen_command(argv: Sequence[str]) -> str | None:
    """The command `argv` names (its first word that is not an option), if it is one."""
    word = next((arg for arg in argv if not arg.startswith("-")), None)
    return word if word in COMMANDS else None


def command_module(command: str) -> str | None:
    """The module of `command`: the core's own, or the one the installed distribution that
    adds it names (:data:`COMMANDS_GROUP`); `None` when that distribution is not installed."""
    module = COMMANDS[command][0]
    if module != PLUGGED:
        return module
    found = entry_points(group=COMMANDS_GROUP, name=command)
    return next((entry.value for entry in found), None)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser, with the full grammar of `command` (every command's when `None`); the
    others are listed by name and summary only, their modules left unimported."""
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
    loaded = command_module(command) if command else None
    for name, (module, summary) in COMMANDS.items():
        if name in commands.choices:
            continue  # its module added it with the command before it
        if loaded is not None and (module == loaded or name == command):
            # It adds all its commands, in this table's order (they are adjacent here).
            importlib.import_module(loaded).add_parsers(commands)
        else:
            commands.add_parser(name, help=summary, description=summary)
    for sub in commands.choices.values():
        # Also after the command (`mcp-tasks reap --debug`); unset, the global flag stands.
        sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `mcp-tasks` console script; returns the exit code."""
    words = sys.argv[1:] if argv is None else list(argv)
    command = chosen_command(words)
    if command is not None and command_module(command) is None:
        print(
            f"mcp-tasks {command}: a developer command of the contract distribution, which "
            f"is not installed: {PLUGGED_INSTALL}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    args = build_parser(command).parse_args(words)
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
