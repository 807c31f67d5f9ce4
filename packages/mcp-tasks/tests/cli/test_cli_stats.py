"""`mcp-tasks stats` on a real SQLite file: a known population's figures, read-only, its
errors, and `--watch` until Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from typing import TYPE_CHECKING

import anyio
import pytest

from mcp_tasks import MemoryTaskStore, StoreOptions
from mcp_tasks.cli import _stores, main
from mcp_tasks.domain.clock import system_clock
from mcp_tasks.stores.opening import with_query
from mcp_tasks.stores.protocol import STORE_OPERATIONS
from mcp_tasks_contract.suite.stats import OPTIONS, Population, populate
from mcp_tasks_sqlite import SQLiteTaskStore

if TYPE_CHECKING:
    from pathlib import Path

    from mcp_tasks import Store


CAPS = ["--max-rows", str(OPTIONS.max_rows), "--max-active-per-owner", "5"]


async def wait_past(epoch_ms: int) -> None:
    """The SQLite store keeps the system clock: wait until it is past ``epoch_ms``."""
    for _ in range(1_000):
        left_ms = epoch_ms + 1 - system_clock()
        if left_ms <= 0:
            return
        await anyio.sleep(left_ms / 1000)
    raise AssertionError("the system clock did not move")


@pytest.fixture
def populated(tmp_path: Path) -> tuple[str, Population]:
    """A SQLite file holding the contract's stats population, and its URL."""
    url = f"sqlite:///{tmp_path / 'tasks.db'}"

    async def fill() -> Population:
        async with SQLiteTaskStore(tmp_path / "tasks.db", OPTIONS) as store:
            return await populate(store, wait_past)

    return url, anyio.run(fill)


def test_stats_json_gives_every_figure_of_a_known_population(
    populated: tuple[str, Population], capsys: pytest.CaptureFixture[str]
) -> None:
    """--json prints one object with the exact counts of every state, the caps given on
    the command line, and no task id or owner."""
    url, population = populated
    assert main(["stats", "--store", url, "--json", *CAPS]) == 0
    out = capsys.readouterr().out
    figures = json.loads(out)
    age = figures.pop("oldest_working_age_ms")
    assert figures.pop("now") - age == population.oldest_working_created_at
    assert figures == {
        "store": url,
        "rows": 11,
        "live_rows": 10,
        "max_rows": 50,
        "expired": 1,
        "by_status": {
            "working": 6,
            "input_required": 1,
            "completed": 1,
            "failed": 1,
            "cancelled": 1,
        },
        "active": 7,
        "claimed": 1,
        "unclaimed": 6,
        "lease_lapsed": 1,
        "retry_due": 1,
        "retry_pending": 1,
        "waiting_unclaimed": 0,
        "unclaimed_after_ms": 30_000,
        "expiring_within_ms": 3_600_000,
        "expiring_soon": 2,
        "owners": 2,
        "busiest_owners": [3, 2],
        "max_active_per_owner": 5,
    }
    assert not any(owner in out for owner in ("alice", "bob", "carol"))


def test_stats_text_names_each_figure(
    populated: tuple[str, Population], capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --json, one line per figure a person reads."""
    url, _ = populated
    assert main(["stats", "--store", url, *CAPS]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:6] == [
        f"store: {url}",
        "rows: 10 (of the row cap 50, 20 %); 1 expired, not reaped yet",
        "status: working 6, input_required 1, completed 1, failed 1, cancelled 1",
        "active: 7: 1 claimed under a live lease, 6 unclaimed",
        "waiting for recovery: 1 with a lapsed lease, 1 retries due (1 more not due yet)",
        "claimable, unclaimed for 30s or more: 0 (no running process serves their tool, "
        "or all are full)",
    ]
    assert lines[6].startswith("oldest working task: ")
    assert lines[6].endswith(" old")
    assert lines[7:] == [
        "expiring within 1h: 2",
        "owners with active tasks: 2; the busiest have 3, 2 (per-owner cap 5)",
    ]


def test_stats_reports_the_default_per_owner_cap(
    populated: tuple[str, Population], capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --max-active-per-owner the reading shows StoreOptions' default cap (1 000),
    the one a server opening the store from its URL has; 'none' shows no cap."""
    url, _ = populated
    assert main(["stats", "--store", url]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("(per-owner cap 1000)")
    assert main(["stats", "--store", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["max_active_per_owner"] == 1_000
    assert main(["stats", "--store", url, "--max-active-per-owner", "none"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("(no per-owner cap)")


class ProtocolOnlyStore:
    """A third party's store: the Store operations and nothing else (no stats)."""

    def __init__(self) -> None:
        inner = MemoryTaskStore()
        for name in STORE_OPERATIONS:
            setattr(self, name, getattr(inner, name))


def test_stats_on_a_store_without_stats_says_it_is_not_offered(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store without stats(): one line saying so and where it is described, exit 7."""

    def opened(url: str | None, *, options: StoreOptions | None = None) -> Store:
        return ProtocolOnlyStore()  # type: ignore[return-value]

    monkeypatch.setattr(_stores, "open_store", opened)
    assert main(["stats", "--store", "mine://x"]) == 7
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2
    assert err[0].startswith("mcp-tasks stats: the store ")
    assert err[0].endswith("(ProtocolOnlyStore) does not offer stats")
    assert "docs/store-contract.md" in err[1]


def test_stats_on_an_unreachable_store_is_one_line_and_exit_6(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A store that cannot be reached: the CLI's one line naming it and the cause."""
    code = main(["stats", "--store", "postgresql://nobody@127.0.0.1:1/none"])
    err = capsys.readouterr().err
    assert code == 6
    assert err.startswith("mcp-tasks stats: cannot reach the store postgresql://")
    assert "Traceback" not in err


def test_stats_rejects_a_watch_interval_that_is_not_positive(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--watch takes seconds above 0; anything else is a usage error, exit 2."""
    with pytest.raises(SystemExit) as exited:
        main(["stats", "--store", "memory://", "--watch", "0"])
    assert exited.value.code == 2
    assert "--watch: must be above 0" in capsys.readouterr().err


def watching(url: str, *extra: str) -> subprocess.Popen[str]:
    """`mcp-tasks stats --watch 0.05` in a process of its own, Ctrl-C deliverable."""
    return subprocess.Popen(
        [sys.executable, "-m", "mcp_tasks.cli", "stats", "--store", url, "--watch", "0.05", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A process started in the background may inherit SIGINT ignored.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
    )


def test_stats_watch_off_a_terminal_prints_plain_readings_and_stops_on_ctrl_c(
    populated: tuple[str, Population],
) -> None:
    """Off a terminal --watch prints one JSON line per reading (no redrawing), and Ctrl-C
    ends it cleanly: exit 0, nothing on stderr."""
    url, _ = populated
    process = watching(url, "--json")
    assert process.stdout is not None
    readings = [json.loads(process.stdout.readline()) for _ in range(3)]
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert (process.returncode, err) == (0, "")
    assert [reading["rows"] for reading in readings] == [11, 11, 11]
    assert readings[0]["now"] < readings[2]["now"]
    assert "\x1b" not in out


def test_stats_watch_ends_quietly_when_its_reader_leaves(
    populated: tuple[str, Population],
) -> None:
    """A watch piped into a reader that stops reading (`| head -1`) ends with exit 0 and
    no traceback."""
    url, _ = populated
    process = watching(url, "--json")
    assert process.stdout is not None
    assert process.stderr is not None
    assert json.loads(process.stdout.readline())["rows"] == 11
    process.stdout.close()
    assert process.wait(timeout=60) == 0
    assert process.stderr.read() == ""
    process.stderr.close()


def test_stats_watch_on_a_terminal_redraws_in_place_and_stops_on_ctrl_c(
    populated: tuple[str, Population],
) -> None:
    """On a terminal --watch redraws the same lines (cursor moves, no scrolling log),
    and Ctrl-C ends it cleanly with exit 0."""
    url, _ = populated
    leader, follower = os.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "mcp_tasks.cli", "stats", "--store", url, "--watch", "0.05"],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
    )
    os.close(follower)
    shown = b""
    deadline = time.monotonic() + 60
    while shown.count(b"store: ") < 3 and time.monotonic() < deadline:
        shown += os.read(leader, 65536)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    os.close(leader)
    assert (process.returncode, err) == (0, b"")
    assert shown.count(b"store: ") >= 3
    assert b"\x1b[" in shown  # rich moves the cursor back up to redraw


def test_stats_on_a_sqlite_file_never_migrated_says_nothing_is_there_yet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reachable store whose namespace has no tables: not "cannot reach", but that
    nothing is stored there yet and the command that creates the tables."""
    url = f"sqlite:///{tmp_path}/fresh.db"
    code = main(["stats", "--store", url])
    err = capsys.readouterr().err.splitlines()
    assert code == 6
    assert err == [
        f"mcp-tasks stats: nothing is stored in {url} yet: its tables were never created",
        f"run `mcp-tasks migrate --store {url}` (a server creates it too, on first use)",
    ]


def test_stats_on_a_postgres_schema_never_migrated_says_nothing_is_there_yet(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same on Postgres: a schema name nobody migrated."""
    url = with_query(postgres_url, schema=f"never_{uuid.uuid4().hex[:12]}")
    code = main(["stats", "--store", url])
    err = capsys.readouterr().err.splitlines()
    assert code == 6
    assert err[0].startswith("mcp-tasks stats: nothing is stored in postgresql://")
    assert err[0].endswith("yet: its tables were never created")
    assert err[1].startswith("run `mcp-tasks migrate --store postgresql://")
