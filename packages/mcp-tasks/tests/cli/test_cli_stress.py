"""`mcp-tasks stress`: the workload's invariants hold on real stores; the report is JSON."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from mcp_tasks.cli import main

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_stress_invariants_hold(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every invariant holds (exit 0) and each phase reports its operation count."""
    url = "memory://" if backend == "memory" else f"sqlite:///{tmp_path / 'stress.db'}"
    code = main(["stress", "--store", url, "--tasks", "60", "--concurrency", "8", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert report["ok"] is True
    assert report["tasks"] == 60
    names = [item["name"] for item in report["invariants"]]
    assert "exactly one of two racing claims wins each live task" in names
    assert all(item["ok"] for item in report["invariants"])
    counts = {phase["name"]: phase["ops"] for phase in report["phases"]}
    assert counts["create"] == 60
    assert counts["cancel"] == 12  # every fifth task
    assert counts["reap"] >= 6


def test_stress_rejects_nonsense_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    """Sizes that cannot make a race are a usage error (exit 2)."""
    assert main(["stress", "--store", "memory://", "--concurrency", "1"]) == 2
    assert "--concurrency" in capsys.readouterr().err
