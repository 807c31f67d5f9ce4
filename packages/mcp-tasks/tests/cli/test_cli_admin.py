"""`mcp-tasks migrate | reap | doctor` against a real store."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import anyio

from mcp_tasks import MemoryTaskStore, StoreUnavailable
from mcp_tasks.cli import admin, main
from mcp_tasks.cli._stores import DEFAULT_STORE_URL, resolve_store_url
from mcp_tasks.stores import opening
from mcp_tasks.stores.opening import drop_namespace, with_query

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def test_doctor_on_memory_reports_every_check_ok(capsys: pytest.CaptureFixture[str]) -> None:
    """doctor reads, writes and lists the operations of a reachable store, and exits 0."""
    assert main(["doctor", "--store", "memory://"]) == 0
    out = capsys.readouterr().out
    assert "MemoryTaskStore" in out
    for check in ("read", "write", "operations", "migrate", "notifier", "diagnose"):
        assert check in out
    assert "FAIL" not in out
    assert "created a probe task and cancelled it; it reads back cancelled" in out
    assert out.endswith("changed:\n  one probe task, cancelled; the reaper deletes it after 60 s\n")


class DiagnosedStore(MemoryTaskStore):
    """The memory store with a diagnose() that answers the given rows (or raises)."""

    def __init__(self, answer: list[tuple[str, str, str]] | Exception) -> None:
        super().__init__()
        self.answer = answer

    async def diagnose(self) -> list[tuple[str, str, str]]:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def doctor_on(
    store: MemoryTaskStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, list[str]]:
    """doctor's exit code and its checked: lines, on ``store``."""
    monkeypatch.setattr(admin, "open_store", lambda url: store)
    code = main(["doctor", "--store", "memory://"])
    out = capsys.readouterr().out
    return code, out.split("checked:\n", 1)[1].split("capabilities:\n", 1)[0].splitlines()


def test_doctor_prints_diagnose_rows_and_only_a_failure_changes_the_exit_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store's diagnose() rows follow the probe rows: ok and WARN keep exit 0, a FAIL
    row makes it 1, and a level doctor does not know counts as FAIL."""
    rows = [("server", "ok", "v1"), ("disk", "warn", "nothing kept")]
    code, checked = doctor_on(DiagnosedStore(rows), monkeypatch, capsys)
    assert code == 0
    assert checked[3:] == ["  ok   server      v1", "  WARN disk        nothing kept"]
    code, checked = doctor_on(DiagnosedStore([("schema", "fail", "gone")]), monkeypatch, capsys)
    assert (code, checked[3:]) == (1, ["  FAIL schema      gone"])
    code, checked = doctor_on(DiagnosedStore([("x", "bad", "odd")]), monkeypatch, capsys)
    assert (code, checked[3:]) == (1, ["  FAIL x           odd"])


def test_doctor_reports_a_diagnose_that_raises_as_a_failed_row(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A diagnose() that raises is one FAIL row with the error, exit 1, not a traceback;
    an unreachable store's is reported as unreachable."""
    code, checked = doctor_on(DiagnosedStore(KeyError("oops")), monkeypatch, capsys)
    assert (code, checked[3:]) == (1, ["  FAIL diagnose    raised KeyError: 'oops'"])
    lost = StoreUnavailable()
    lost.__cause__ = ConnectionResetError("reset by peer")
    code, checked = doctor_on(DiagnosedStore(lost), monkeypatch, capsys)
    assert (code, checked[3:]) == (1, ["  FAIL diagnose    unreachable: reset by peer"])


def test_doctor_lists_diagnose_among_the_capabilities(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The capabilities list says whether the store has diagnose()."""
    assert main(["doctor", "--store", "memory://"]) == 0
    assert "  diagnose    no " in capsys.readouterr().out
    monkeypatch.setattr(admin, "open_store", lambda url: DiagnosedStore([]))
    assert main(["doctor", "--store", "memory://"]) == 0
    assert "  diagnose    yes" in capsys.readouterr().out


def test_reap_prints_the_count(capsys: pytest.CaptureFixture[str]) -> None:
    """reap runs one pass and prints how many tasks it deleted (none on a fresh store)."""
    assert main(["reap", "--store", "memory://"]) == 0
    assert capsys.readouterr().out.strip() == "reaped 0 expired tasks"


def test_migrate_on_a_store_without_schema(capsys: pytest.CaptureFixture[str]) -> None:
    """migrate says so when the store keeps no schema, and succeeds."""
    assert main(["migrate", "--store", "memory://"]) == 0
    assert "nothing to migrate" in capsys.readouterr().out


def test_doctor_and_migrate_agree_on_what_redis_migrates(
    redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """On Redis (no schema; counts of its tasks by status) migrate and doctor's migrate
    line say what its migrate() does; neither ever describes a schema."""
    url = with_query(redis_url, prefix=f"doctor-{uuid.uuid4().hex[:12]}")
    assert main(["migrate", "--store", url]) == 0
    assert capsys.readouterr().out == f"{url}: every task was already counted; nothing changed\n"
    assert main(["doctor", "--store", url]) == 0
    out = capsys.readouterr().out
    migrate_line = next(line for line in out.splitlines() if line.startswith("  migrate "))
    assert migrate_line.split()[:2] == ["migrate", "yes"]
    assert "keeps counts of its tasks by status" in migrate_line
    assert "(Redis keeps no schema)" in migrate_line
    assert "has a schema" not in out
    assert "created the schema" not in out
    anyio.run(drop_namespace, url)  # the probe task doctor wrote


def test_unknown_scheme_fails_with_the_store_error(capsys: pytest.CaptureFixture[str]) -> None:
    """An unregistered scheme is the store layer's refusal as one line, exit 2 (a usage
    error), not a silent fallback."""
    assert main(["reap", "--store", "nosuchstore://x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "mcp-tasks reap: bad store URL: No store is registered for nosuchstore://"
    )
    assert err.count("\n") == 1


def test_a_store_not_installed_says_so_with_both_install_routes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One of our stores, not installed: not "bad store URL" (the URL is fine) but that the
    store is not installed, and a next step with the package-index line and the route from
    a clone; exit 2. (The entry points are emptied: every store is installed here.)"""
    monkeypatch.setattr(opening, "entry_points", lambda **_: [])
    assert main(["migrate", "--store", "postgresql://tasks@db/tasks"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "mcp-tasks migrate: the postgresql:// store is not installed (the URL itself is fine)",
        'install it: pip install "mcp-tasks[postgres]"; until that is on the package index, '
        'pip install "./packages/mcp-tasks[postgres]" ./packages/mcp-tasks-* '
        '(in a clone; README "Installing from a clone")',
    ]


def test_debug_shows_the_traceback_and_keeps_the_exit_code(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--debug (before or after the command) prints the traceback, then the same line."""
    for argv in (["--debug", "reap"], ["reap", "--debug"]):
        assert main([*argv, "--store", "nosuchstore://x"]) == 2
        err = capsys.readouterr().err
        assert "Traceback (most recent call last)" in err
        assert "UnknownStoreScheme" in err
        assert err.endswith(
            "mcp-tasks reap: bad store URL: No store is registered for "
            "nosuchstore://; a third-party store registers its scheme in the "
            "'mcp_tasks.stores' entry-point group\n"
        )


def test_store_url_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    """--store wins over $MCP_TASKS_STORE_URL, which wins over the SQLite default."""
    monkeypatch.delenv("MCP_TASKS_STORE_URL", raising=False)
    assert resolve_store_url(None) == DEFAULT_STORE_URL
    monkeypatch.setenv("MCP_TASKS_STORE_URL", "memory://")
    assert resolve_store_url(None) == "memory://"
    assert resolve_store_url("sqlite:///x.db") == "sqlite:///x.db"


def test_migrate_and_doctor_on_sqlite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On a SQL store, the first migrate says it created the schema, a second that it was
    already current; doctor then sees a working store and changes only its probe task."""
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    assert main(["migrate", "--store", url]) == 0
    assert capsys.readouterr().out == f"{url}: created the schema\n"
    assert (tmp_path / "tasks.db").exists()
    assert main(["migrate", "--store", url]) == 0
    assert capsys.readouterr().out == f"{url}: schema was already current; nothing changed\n"
    assert main(["doctor", "--store", url]) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out
    assert "migrate     yes" in out
    assert "created the schema" not in out
    assert "changed:\n  one probe task, cancelled" in out


def test_migrate_and_doctor_on_postgres_say_exactly_what_they_did(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """On Postgres too: the first migrate of a fresh schema says it created it, the second
    that it was current; doctor on another fresh schema says it created that one."""
    schema = f"mcpt_cli_{uuid.uuid4().hex[:10]}"
    url = with_query(postgres_url, schema=schema)
    fresh = with_query(postgres_url, schema=schema + "_doctor")
    try:
        assert main(["migrate", "--store", url]) == 0
        first = capsys.readouterr().out
        assert main(["migrate", "--store", url]) == 0
        second = capsys.readouterr().out
        assert main(["doctor", "--store", fresh]) == 0
        doctored = capsys.readouterr().out
    finally:
        anyio.run(drop_namespace, url)
        anyio.run(drop_namespace, fresh)
    assert first.endswith(": created the schema\n")
    assert second.endswith(": schema was already current; nothing changed\n")
    assert "changed:\n  created the schema" in doctored


def test_doctor_says_it_created_the_schema_of_a_fresh_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """doctor on a new SQLite file names the schema it created (a store's first use does),
    besides its probe task; a second run changes only the probe task."""
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    assert main(["doctor", "--store", url]) == 0
    out = capsys.readouterr().out
    assert "changed:\n  created the schema" in out
    assert main(["doctor", "--store", url]) == 0
    assert "created the schema" not in capsys.readouterr().out


def test_doctor_fails_on_an_unreachable_store(capsys: pytest.CaptureFixture[str]) -> None:
    """A store that cannot be reached is a FAIL row and exit 1, not a traceback."""
    assert main(["doctor", "--store", "postgresql://nobody@127.0.0.1:9/none"]) == 1
    out = capsys.readouterr().out
    assert "FAIL read" in out
    assert "unreachable: connection refused" in out
    assert out.endswith("changed:\n  nothing\n")


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
