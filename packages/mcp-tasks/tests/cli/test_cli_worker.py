"""`mcp-tasks worker`: its usage errors, and a clean stop on SIGTERM (the crash tests in
tests/durable run it against a dying server)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

from mcp_tasks.cli import main

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def test_a_missing_app_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["worker", "no_such_module_here:mcp", "--store", "memory://"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("mcp-tasks worker: no such module 'no_such_module_here'")


def test_an_unreachable_store_is_exit_6(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["worker", "--store", "sqlite:////nonexistent-mcp-tasks-dir/sub/t.db"]) == 6
    assert "cannot reach the store" in capsys.readouterr().err


def test_sigterm_stops_the_worker_cleanly(tmp_path: Path) -> None:
    """The demo tools' worker says it is running, and on SIGTERM says it releases its tasks
    and exits 0."""
    process = subprocess.Popen(
        [sys.executable, "-m", "mcp_tasks.cli", "worker", "--store", f"sqlite:///{tmp_path}/t.db"],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stderr is not None
        # log lines of the server's own logging (the store named at start-up) may come first
        lines = iter(process.stderr.readline, "")
        banner = next((line for line in lines if "mcp-tasks: worker" in line), "")
        assert banner.startswith("mcp-tasks: worker inproc-")
        assert f"(store: sqlite:///{tmp_path}/t.db)" in banner
        process.send_signal(signal.SIGTERM)
        rest = process.communicate(timeout=60)[1]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()  # a failed assertion above leaves it open to warn at GC
    assert process.returncode == 0
    assert "SIGTERM: releasing tasks and stopping" in rest


def _worker_start_up(tmp_path: Path, *options: str) -> str:
    """A demo worker's stderr up to and with its banner, then it is stopped."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mcp_tasks.cli",
            "worker",
            "--store",
            f"sqlite:///{tmp_path}/t.db",
            *list(options),
        ],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    seen: list[str] = []
    try:
        assert process.stderr is not None
        for line in iter(process.stderr.readline, ""):
            seen.append(line)
            if "mcp-tasks: worker" in line:
                break
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()
    return "".join(seen)


def test_the_worker_logs_at_its_log_level(tmp_path: Path) -> None:
    """By default the worker's INFO lines say where tasks are stored, one line each;
    `--log-level warning` leaves them out (the banner, no log line, stays)."""
    default = _worker_start_up(tmp_path)
    assert f"INFO:     mcp-tasks: tasks are stored in sqlite:///{tmp_path}/t.db\n" in default
    quiet = _worker_start_up(tmp_path, "--log-level", "warning")
    assert "INFO" not in quiet
    assert "mcp-tasks: worker inproc-" in quiet
