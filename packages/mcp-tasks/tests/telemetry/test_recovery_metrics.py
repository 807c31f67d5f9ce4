"""Takeovers and retries are counted apart (``recovery_run.py``, in a process of its own):
a run that takes over a lapsed lease counts in ``mcp_tasks.tasks.recovered``; a retry counts
once in ``mcp_tasks.tasks.retries`` when it is asked for, and its due run is no recovery."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_a_due_retry_is_no_recovery_and_a_takeover_is_one() -> None:
    """``orphaned`` (a dead process's lapsed lease) is recovered once; ``flaky`` (one retry
    asked for, then run when due) counts one retry and no recovery, and its due run is
    logged as a retry, not as a takeover."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("recovery_run.py"))],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["recovered"] == [[{"gen_ai.tool.name": "orphaned"}, 1]]
    assert report["retries"] == [[{"gen_ai.tool.name": "flaky"}, 1]]
    (takeover,) = [line for line in report["lines"] if line.startswith("resuming")]
    assert "'orphaned'" in takeover
    assert "starting attempt 1 of a task of tool 'flaky' (a retry)" in report["lines"]
