"""`mcp-tasks` installed alone, from its wheel: the developer commands of the contract
distribution are listed, and running one says how to install it (exit 2, one line).

Slow and networked like the other packaging tests: only the ``packaging`` nox session runs it.
"""

from __future__ import annotations

import subprocess

import pytest
from wheelhouse import Installed, bin_dir, clean_env, run, wheel_venv


@pytest.fixture(scope="module")
def core_alone(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """A fresh virtualenv with only ``mcp-tasks`` installed from our wheels."""
    return wheel_venv(tmp_path_factory.mktemp("core-alone"), ("mcp-tasks",))


@pytest.mark.parametrize("argv", [["contract", "memory://"], ["stress", "--tasks", "2"]])
def test_a_developer_command_without_the_contract_distribution_says_how_to_install_it(
    core_alone: Installed, argv: list[str]
) -> None:
    """No mcp_tasks_contract in the venv: exit 2, stderr one line naming the install."""
    done = subprocess.run(
        [str(bin_dir(core_alone.venv) / "mcp-tasks"), *argv],
        cwd=core_alone.outside,
        env=clean_env(core_alone.venv),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr == (
        f"mcp-tasks {argv[0]}: a developer command of the contract distribution, which is "
        "not installed: pip install mcp-tasks-contract\n"
    )


def test_help_lists_the_developer_commands(core_alone: Installed) -> None:
    """`mcp-tasks --help` lists contract and stress whether or not they are installed."""
    done = run(
        [str(bin_dir(core_alone.venv) / "mcp-tasks"), "--help"],
        cwd=core_alone.outside,
        env=clean_env(core_alone.venv),
        timeout=120,
    )
    assert "    contract " in done.stdout
    assert "    stress " in done.stdout
