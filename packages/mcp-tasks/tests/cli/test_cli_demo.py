"""`mcp-tasks demo` as a real subprocess, the way the README tells a newcomer to run it."""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


def test_demo_runs_the_tour_and_exits_0(tmp_path: Path) -> None:
    """The tour runs on the embedded default store (SQLite), shows progress, an answered
    prompt and a cancellation, exits 0, and leaves no file behind where it ran."""
    completed = subprocess.run(
        [sys.executable, "-m", "mcp_tasks.cli", "demo"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    out = completed.stdout
    for line in (
        "(sqlite store)",
        "1. build — a task reporting progress",
        "✓ completed: built main: 4 steps, all green",
        "· input_required",
        "? Deploy to staging?  → answering yes automatically",
        "✓ completed: deployed to staging",
        "→ tasks/cancel",
        "✓ the task ended cancelled",
        "demo finished: all steps as expected",
    ):
        assert line in out
    assert "✗" not in out
    assert list(tmp_path.iterdir()) == []
