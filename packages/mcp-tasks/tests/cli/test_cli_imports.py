"""What each command loads: `--help` and usage errors answer without the SDK, and the
client commands load only the client side (a real `mcp-tasks` process, `-X importtime`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mcp_tasks.cli import COMMANDS, build_parser

SDK = ("mcp", "mcp_types", "pydantic", "httpx2", "anyio", "rich")
SERVER_SIDE = (
    "mcp_tasks.tasks",
    "mcp_tasks.adapters",
    "mcp_tasks.engine",
    "mcp_tasks.runtime",
    "mcp_tasks.cli.serving",
    "mcp_tasks.cli.tour",
    "mcp_tasks.cli.demo_tools",
)


def imported(*argv: str) -> tuple[int, set[str]]:
    """Run `mcp-tasks ARGV`; its exit code and every module it imported."""
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "mcp_tasks.cli", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in run.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    return run.returncode, modules


def loaded(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["call", "--help"],
        ["watch", "--help"],
        ["serve", "--help"],
        ["worker", "--help"],
        ["demo", "--help"],
        ["serve", "app:mcp", "--port", "http"],
        ["nosuchcommand"],
        ["call", "http://127.0.0.1:9/mcp"],  # TOOL missing
        ["call", "http://127.0.0.1:9/mcp", "build", "notapair"],
        ["call", "http://127.0.0.1:9/mcp", "deploy", "--answer", "confirm=true"],
        ["watch", "http://127.0.0.1:9/mcp", "x" * 43, "--answer", "confirm={ok:true}"],
    ],
    ids=" ".join,
)
def test_help_and_usage_errors_load_no_sdk(argv: list[str]) -> None:
    """Neither the SDK nor its libraries are imported to print help or refuse arguments."""
    code, modules = imported(*argv)
    assert code in (0, 2)
    assert "mcp_tasks.cli" in modules
    assert loaded(modules, SDK) == []


@pytest.mark.parametrize("command", ["call", "get", "watch", "cancel"])
def test_client_commands_load_only_the_client_side(command: str) -> None:
    """A client command against a closed port imports the tasks client, and none of the
    server side of mcp-tasks; without a terminal, not the progress bar's library either."""
    argv = ["call", "http://127.0.0.1:9/mcp", "build"] if command == "call" else [command]
    if command != "call":
        argv += ["http://127.0.0.1:9/mcp", "x" * 43]
    code, modules = imported(*argv)
    assert code == 6
    assert "mcp_tasks.client" in modules
    assert loaded(modules, SERVER_SIDE) == []
    assert loaded(modules, ("rich",)) == []


def test_every_command_is_listed_with_its_own_summary() -> None:
    """The summaries `mcp-tasks --help` lists without importing a command are the ones
    the command's module gives its parser."""
    for name, (_, summary) in COMMANDS.items():
        parser = build_parser(name)
        commands = next(action for action in parser._actions if action.dest == "command")
        helps = {choice.dest: choice.help for choice in commands._choices_actions}  # type: ignore[attr-defined]
        assert helps[name] == summary, name
