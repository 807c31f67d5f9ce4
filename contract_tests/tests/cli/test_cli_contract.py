"""`mcp-tasks contract` runs the real contract suite against what it is given."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pathlib import Path


BROKEN_STORE = """
from mcp_tasks.stores.memory import MemoryBackend, MemoryTaskStore

backends = {}


class NeverReaps(MemoryTaskStore):
    async def reap(self, *, limit=500):
        return 0


async def open_store(namespace, options):
    return NeverReaps(options, backend=backends.setdefault(namespace, MemoryBackend()))
"""


def contract(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcp_tasks.cli", "contract", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_contract_passes_for_the_memory_store_url(tmp_path: Path) -> None:
    """memory:// passes (a subset: the create and cancel rules) and leaves no file behind."""
    run = contract("memory://", "--", "-k", "create or cancel", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert " passed" in run.stdout
    assert list(tmp_path.iterdir()) == []


def test_contract_json_reports_rules_and_what_a_url_offers(tmp_path: Path) -> None:
    """`--json FILE` (before STORE or after it) writes the rules passed and none failed; for
    memory:// the backend's namespaces are offered (O-NAMESPACES runs and passes) and the
    rest is not offered; the last line sums it up."""
    selection = ("-k", "create_returns or url_namespace")
    before = contract("--json", "before.json", "memory://", "--", *selection, cwd=tmp_path)
    after = contract("memory://", "--json", "after.json", "--", *selection, cwd=tmp_path)
    for run, name in ((before, "before.json"), (after, "after.json")):
        assert run.returncode == 0, run.stdout + run.stderr
        rules = json.loads((tmp_path / name).read_text())
        assert rules["store"] == "memory://"
        assert "O-NAMESPACES" in rules["passed"]
        assert "S-CREATE.1" in rules["passed"]
        assert rules["failed"] == {}
        assert sorted(rules["not_offered"]) == ["O-CLOCK", "O-NOTIFIER", "O-RESTART"]
        last = run.stdout.splitlines()[-1]
        assert last.startswith("mcp-tasks contract: no rule failed; ")
        assert last.endswith("not offered: O-CLOCK, O-NOTIFIER, O-RESTART")


def test_contract_catches_a_broken_store_factory(tmp_path: Path) -> None:
    """A module:factory store that never reaps fails the suite's reap rules: non-zero exit.
    (Not the race of reapers against writers: a reaper that removes nothing keeps it
    waiting for its minute-long bound before it fails.)"""
    (tmp_path / "broken_store.py").write_text(BROKEN_STORE)
    run = contract(
        "broken_store:open_store", "--", "-k", "reap and not against_writers", cwd=tmp_path
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert " failed" in run.stdout


def test_contract_rejects_a_target_that_is_neither(tmp_path: Path) -> None:
    """A STORE that is neither a URL nor module:factory is a usage error."""
    run = contract("not-a-store", cwd=tmp_path)
    assert run.returncode != 0
    assert "neither a store URL nor module:factory" in run.stderr


#: The create rules' tests but the concurrent ones: these tests are about the URL reaching
#: the suite, a namespace per test; the concurrent creates (the slowest on a server) run in
#: the contract-postgres and contract-redis sessions.
SERVER_SELECTION = ("-k", "create and not concurrent")


@pytest.mark.slow
def test_contract_runs_against_postgres(postgres_url: str, tmp_path: Path) -> None:
    """A postgresql:// URL runs the suite with a schema per test (dropped afterwards)."""
    run = contract(postgres_url, "--", *SERVER_SELECTION, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert " passed" in run.stdout


@pytest.mark.slow
def test_contract_runs_against_redis(redis_url: str, tmp_path: Path) -> None:
    """A redis:// URL runs the suite with a key prefix per test (dropped afterwards)."""
    run = contract(redis_url, "--", *SERVER_SELECTION, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert " passed" in run.stdout
