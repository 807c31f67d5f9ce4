"""The guides' programs, run as a reader runs them: each file written from the page's block
titled with its name, each command a line of the page's ``bash`` blocks (the part before
its comment), run in that folder with this virtualenv's Python and ``mcp-tasks``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from markdown_blocks import REPO, blocks

if TYPE_CHECKING:
    from collections.abc import Mapping

GUIDES = REPO / "docs" / "guides"
BIN = Path(sys.executable).parent
#: Generous: the machine may be shared; a step that takes longer than this has hung.
STEP_S = 120


def write_files(page: Path, folder: Path) -> list[str]:
    """Every block of ``page`` titled as a file, written into ``folder``: their names."""
    names = []
    for block in blocks(page):
        if block.title:
            (folder / block.title).write_text(block.text, encoding="utf-8")
            names.append(block.title)
    return names


def page_commands(page: Path) -> dict[str, str]:
    """Each command of the page's bash blocks → the comment after it ("" if none)."""
    commands = {}
    for block in blocks(page, "bash"):
        for line in block.text.splitlines():
            command, _, comment = line.partition("#")
            if command.strip():
                commands[command.strip()] = comment.strip()
    return commands


def argv(command: str) -> list[str]:
    words = command.split()
    if words[0] == "python":
        return [sys.executable, *words[1:]]
    if words[0] == "mcp-tasks":
        return [str(BIN / "mcp-tasks"), *words[1:]]
    raise AssertionError(f"not a command this test runs: {command}")


def environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200", **(extra or {})}
    env.pop("MCP_TASKS_STORE_URL", None)
    return env


def run(page: Path, command: str, folder: Path) -> str:
    """Run one command of ``page`` to its end in ``folder``: its stdout (it must exit 0)."""
    assert command in page_commands(page), f"not a command of {page.name}: {command}"
    done = subprocess.run(
        argv(command),
        cwd=folder,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=STEP_S,
        check=False,
    )
    assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stderr}"
    return done.stdout


def test_stdio_a_task_outlives_the_launch_that_started_it(tmp_path: Path) -> None:
    """start.py's launch ends mid-task; finish.py's launch of the same server on the same
    SQLite file runs it again and reads its result by the kept id, as the page shows."""
    page = GUIDES / "stdio.md"
    assert write_files(page, tmp_path) == ["server.py", "start.py", "finish.py"]
    commands = page_commands(page)

    started = run(page, "python start.py", tmp_path)
    assert started.strip() == commands["python start.py"]
    assert (tmp_path / "task-id").stat().st_mode & 0o077 == 0  # only its owner reads it
    finished = run(page, "python finish.py", tmp_path)
    assert finished.strip() == commands["python finish.py"]
