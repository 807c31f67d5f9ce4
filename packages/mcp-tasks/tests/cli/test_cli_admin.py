"""`mcp-tasks migrate | reap | doctor` against a real store."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks import UnknownStoreScheme
from mcp_tasks.cli import main
from mcp_tasks.cli._stores import DEFAULT_STORE_URL, resolve_store_url

if TYPE_CHECKING:
    from pathlib import Path


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


def test_migrate_and_doctor_on_sqlite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On a SQL store, migrate creates the schema and doctor sees a working store with it."""
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    assert main(["migrate", "--store", url]) == 0
    assert "schema is up to date" in capsys.readouterr().out
    assert (tmp_path / "tasks.db").exists()
    assert main(["doctor", "--store", url]) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out
    assert "yes — creates its schema" in out


def test_doctor_fails_on_an_unreachable_store(capsys: pytest.CaptureFixture[str]) -> None:
    """A store that cannot be reached is a FAIL row and exit 1, not a traceback."""
    assert main(["doctor", "--store", "postgresql://nobody@127.0.0.1:9/none"]) == 1
    assert "FAIL read" in capsys.readouterr().out


def test_serve_falls_back_to_memory_without_sqlite(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With no URL and no SQLite store installed, serving uses memory:// and says so;
    the admin commands keep the SQLite default (a memory store would prove nothing)."""
    import mcp_tasks.cli._stores as stores  # noqa: PLC0415 - the module whose lookup is faked

    monkeypatch.delenv("MCP_TASKS_STORE_URL", raising=False)
    real_find_spec = stores.importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> object:
        return None if name == "mcp_tasks_sqlite" else real_find_spec(name, package)

    monkeypatch.setattr(stores.importlib.util, "find_spec", find_spec)
    assert resolve_store_url(None, for_serving=True) == "memory://"
    assert 'pip install "mcp-tasks[sqlite]"' in capsys.readouterr().err
    assert resolve_store_url(None) == DEFAULT_STORE_URL
