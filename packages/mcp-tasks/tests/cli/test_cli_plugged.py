"""`contract` and `stress` come from the contract distribution (entry-point group
`mcp_tasks.commands`): run when it is installed, listed and explained when it is not."""

from __future__ import annotations

from importlib.metadata import EntryPoints

import pytest

import mcp_tasks.cli
from mcp_tasks.cli import COMMANDS, COMMANDS_GROUP, PLUGGED, command_module, main

PLUGGED_COMMANDS = [name for name, (module, _) in COMMANDS.items() if module == PLUGGED]


def test_the_developer_commands_are_plugged() -> None:
    """The core wheel holds neither command: both are found through the entry-point group."""
    assert PLUGGED_COMMANDS == ["contract", "stress"]


@pytest.mark.parametrize("command", PLUGGED_COMMANDS)
def test_an_installed_contract_distribution_provides_them(command: str) -> None:
    """With mcp-tasks-contract installed (as in this workspace) each command's module is
    the contract distribution's own."""
    assert command_module(command) == f"mcp_tasks_contract.cli.{command}"


@pytest.mark.parametrize("command", PLUGGED_COMMANDS)
def test_without_the_contract_distribution_the_command_says_how_to_install_it(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No distribution in the group: exit 2 and one line naming the install command, before
    any argument is read (its grammar is the missing distribution's)."""

    def no_commands(*, group: str, name: str) -> EntryPoints:
        assert group == COMMANDS_GROUP
        return EntryPoints(())

    monkeypatch.setattr(mcp_tasks.cli, "entry_points", no_commands)
    assert main([command, "memory://", "--no-such-option"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"mcp-tasks {command}: a developer command of the contract distribution, which is "
        "not installed: pip install mcp-tasks-contract\n"
    )


def test_help_lists_them_without_loading_them(capsys: pytest.CaptureFixture[str]) -> None:
    """`mcp-tasks --help` names both with their summaries, installed or not."""
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    for command in PLUGGED_COMMANDS:
        assert f"    {command}" in out
        assert " ".join(COMMANDS[command][1].split()[:4]) in " ".join(out.split())
