"""`mcp-tasks migrate | reap | doctor` against a real store."""

from __future__ import annotations

import pytest

from mcp_tasks import UnknownStoreScheme
from mcp_tasks.cli import main
from mcp_tasks.cli._stores import DEFAULT_STORE_URL, resolve_store_url


def test_doctor_on_memory_reports_every_check_ok(capsys: pytest.CaptureFixture[str]) -> None:
    """doctor reads, writes and lists the operations of a reachable store, and exits 0."""
    assert main(["doctor", "--store", "memory://"]) == 0
    out = capsys.readouterr().out
    assert "MemoryTaskStore" in out
    for check in ("read", "write", "operations", "migrate", "notifier"):
        assert check in out
    assert "FAIL" not in out
    assert "create → cancel → cancelled" in out


def test_reap_prints_the_count(capsys: pytest.CaptureFixture[str]) -> None:
    """reap runs one pass and prints how many tasks it deleted (none on a fresh store)."""
    assert main(["reap", "--store", "memory://"]) == 0
    assert capsys.readouterr().out.strip() == "reaped 0 expired tasks"


def test_migrate_on_a_store_without_schema(capsys: pytest.CaptureFixture[str]) -> None:
    """migrate says so when the store keeps no schema, and succeeds."""
    assert main(["migrate", "--store", "memory://"]) == 0
    assert "nothing to migrate" in capsys.readouterr().out


def test_unknown_scheme_fails_with_the_store_error() -> None:
    """An unregistered scheme is the store layer's UnknownStoreScheme, not a silent fallback."""
    with pytest.raises(UnknownStoreScheme):
        main(["reap", "--store", "nosuchstore://x"])


def test_store_url_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    """--store wins over $MCP_TASKS_STORE_URL, which wins over the SQLite default."""
    monkeypatch.delenv("MCP_TASKS_STORE_URL", raising=False)
    assert resolve_store_url(None) == DEFAULT_STORE_URL
    monkeypatch.setenv("MCP_TASKS_STORE_URL", "memory://")
    assert resolve_store_url(None) == "memory://"
    assert resolve_store_url("sqlite:///x.db") == "sqlite:///x.db"
