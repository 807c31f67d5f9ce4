"""Every input a user can get wrong, run as a new user would (a real `mcp-tasks` process,
real stores): at most two lines on stderr, no traceback, the exit code docs/cli.md gives."""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from mcp_tasks.testing import free_socket

if TYPE_CHECKING:
    from pathlib import Path

USAGE, UNREACHABLE = 2, 6
CLOSED_PG = "postgresql://tasks:s3cret@127.0.0.1:9/none"  # port 9: nothing listens
MISSING_DIR_DB = "sqlite:////nonexistent-mcp-tasks-dir/sub/tasks.db"
BAD_URLS = {
    "nosuchscheme://x": "bad store URL: No store is registered for nosuchscheme://",
    "notaurl": "bad store URL: 'notaurl' is not a store URL",
    "sqlite://relative.db": "bad store URL: sqlite://relative.db: A SQLite store URL looks like",
}
STORE_COMMANDS = [
    ["migrate"],
    ["reap"],
    ["doctor"],
    ["stress", "--tasks", "2"],
    ["demo"],
    ["serve", "--port", "0"],
]

CASES: list[tuple[list[str], int, str]] = [
    *(
        ([*command, "--store", url], USAGE, f"mcp-tasks {command[0]}: {cause}")
        for command in STORE_COMMANDS
        for url, cause in BAD_URLS.items()
    ),
    *(
        (["contract", url], USAGE, f"mcp-tasks contract: {cause}")
        for url, cause in BAD_URLS.items()
        if url != "notaurl"  # `contract notaurl` is a module:factory question, below
    ),
    (["contract", "notaurl"], USAGE, "mcp-tasks contract: 'notaurl' is neither a store URL"),
    *(
        (
            [*command, "--store", url],
            USAGE,
            f"mcp-tasks {command[0]}: bad store URL: No store is registered for {typo}://; "
            f"did you mean {meant}? (installed: memory://, ",
        )
        for command in (["migrate"], ["serve", "--port", "0"])
        for url, typo, meant in (
            ("sqllite:///x.db", "sqllite", "sqlite:///x.db"),
            (
                "postgres+asyncpg://tasks:s3cret@127.0.0.1:9/none",
                "postgres+asyncpg",
                "postgres://tasks:***@127.0.0.1:9/none",
            ),
        )
    ),
    *(
        (
            [command, "--store", CLOSED_PG],
            UNREACHABLE,
            f"mcp-tasks {command}: cannot reach the store postgresql://tasks:***@127.0.0.1:9/"
            "none?schema=mcp_tasks: connection refused",
        )
        for command in ("migrate", "reap", "demo")
    ),
    *(
        (
            [command, "--store", MISSING_DIR_DB],
            UNREACHABLE,
            f"mcp-tasks {command}: cannot reach the store {MISSING_DIR_DB}: unable to open "
            "database file",
        )
        for command in ("migrate", "reap", "demo")
    ),
    (
        ["serve", "--store", MISSING_DIR_DB, "--port", "0"],
        UNREACHABLE,
        f"mcp-tasks serve: cannot reach the store {MISSING_DIR_DB}: unable to open database file",
    ),
    (
        ["serve", "--store", CLOSED_PG, "--port", "0"],
        UNREACHABLE,
        "mcp-tasks serve: cannot reach the store postgresql://tasks:***@127.0.0.1:9/none",
    ),
    (
        ["serve", "no_such_module_xyz:app", "--store", "memory://"],
        USAGE,
        "mcp-tasks serve: no such module 'no_such_module_xyz'",
    ),
    (
        ["serve", "json:no_such_attr", "--store", "memory://"],
        USAGE,
        "mcp-tasks serve: module 'json' has no attribute 'no_such_attr'",
    ),
    (["serve", "--port", "70000"], USAGE, "mcp-tasks serve: argument --port: a port is 0 to"),
    (["serve", "--port", "-1"], USAGE, "mcp-tasks serve: argument --port: a port is 0 to"),
    (
        ["reap", "--store", "memory://", "--limit", "-5"],
        USAGE,
        "mcp-tasks reap: argument --limit: must be at least 1, got -5",
    ),
    # Only what is missing is named: a tool's arguments are optional.
    (["call"], USAGE, "mcp-tasks call: the following arguments are required: url, tool\n"),
    (
        ["call", "http://127.0.0.1:9/mcp"],
        USAGE,
        "mcp-tasks call: the following arguments are required: tool\n",
    ),
    (
        ["call", "http://127.0.0.1:9/mcp", "build", "notapair"],
        USAGE,
        "mcp-tasks call: an argument must look like key=value, got 'notapair'",
    ),
    (
        ["call", "http://127.0.0.1:9/mcp", "build", "--answer", "notapair"],
        USAGE,
        "mcp-tasks call: --answer must look like key=value, got 'notapair'",
    ),
    # A server URL without http(s)://, or a negative bound: usage errors, not "cannot reach".
    *(
        (
            [command, "localhost:9", *rest],
            USAGE,
            f"mcp-tasks {command}: argument url: 'localhost:9' is not a server URL "
            "(http:// or https://, with a host); e.g. http://localhost:9/mcp\n",
        )
        for command, rest in (("call", ["build"]), ("get", ["x" * 43]), ("watch", ["x" * 43]))
    ),
    *(
        (
            [command, "http://127.0.0.1:9/mcp", second, "--reconnect-for", "-1"],
            USAGE,
            f"mcp-tasks {command}: argument --reconnect-for: '-1': give 0 or more seconds\n",
        )
        for command, second in (("call", "build"), ("watch", "x" * 43))
    ),
    # pymongo's few hundred characters of topology, said as what they mean.
    (
        ["migrate", "--store", "mongodb://127.0.0.1:9/none"],
        UNREACHABLE,
        "mcp-tasks migrate: cannot reach the store mongodb://127.0.0.1:9/none?prefix=mcp_tasks: "
        "connection refused\n",
    ),
    # Answers tasks/update cannot carry: refused before connecting (port 9 would be exit 6).
    *(
        (
            [command, "http://127.0.0.1:9/mcp", second, "--answer", answer],
            USAGE,
            f"mcp-tasks {command}: --answer {answer} cannot be sent: {why}",
        )
        for command, second in (("call", "deploy"), ("watch", "x" * 43))
        for answer, why in (
            ("confirm=true", "an answer is a JSON object: the form's fields, or an elicitation"),
            ('confirm="yes"', "an answer is a JSON object"),
            ("confirm={ok:true}", "'{ok:true}' is not JSON"),
            ('confirm={"action": "ok"}', "the action is one of accept, decline, cancel"),
            (
                'confirm={"a": {"b": 1}}',
                "field 'a' is an object; a form field is a string, number, boolean, null or",
            ),
        )
    ),
]


@pytest.mark.parametrize(
    ("argv", "code", "first_line"), CASES, ids=[" ".join(argv) for argv, _, _ in CASES]
)
def test_a_bad_input_is_one_line_and_its_exit_code(
    argv: list[str], code: int, first_line: str, tmp_path: Path
) -> None:
    """The first stderr line names the cause; at most one more line (the next step)."""
    run = subprocess.run(
        [sys.executable, "-m", "mcp_tasks.cli", *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in run.stderr, run.stderr
    lines = run.stderr.splitlines()
    assert 1 <= len(lines) <= 2, run.stderr
    assert (lines[0] + "\n").startswith(first_line), run.stderr
    assert "s3cret" not in run.stderr + run.stdout
    assert run.returncode == code, run.stderr
    assert "mcp-tasks: serving" not in run.stderr  # serve never started
    assert list(tmp_path.iterdir()) == []  # nothing created where it ran


def test_debug_adds_the_traceback(tmp_path: Path) -> None:
    """--debug shows the traceback of the same failure; the exit code stays."""
    run = subprocess.run(
        [sys.executable, "-m", "mcp_tasks.cli", "--debug", "reap", "--store", CLOSED_PG],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == UNREACHABLE
    assert "Traceback (most recent call last)" in run.stderr
    assert "ConnectionRefusedError" in run.stderr
    assert "s3cret" not in run.stderr
    assert run.stderr.splitlines()[-2].startswith("mcp-tasks reap: cannot reach the store")


def test_help_calls_no_optional_argument_required() -> None:
    """--store is optional everywhere; the help says so (no `--store URL` outside [])."""
    for command in ("stress", "migrate", "reap", "doctor", "serve", "demo"):
        run = subprocess.run(
            [sys.executable, "-m", "mcp_tasks.cli", command, "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert "[--store URL]" in run.stdout
        assert run.stdout.replace("[--store URL]", "").count("--store URL`") == 0


def test_serve_on_a_port_in_use_is_one_line_exit_6(tmp_path: Path) -> None:
    """A port something already listens on: one line naming the cause, a next step, exit 6,
    and no banner (nothing was served)."""
    with free_socket() as taken:  # bound and listening
        port = taken.getsockname()[1]
        command = ["serve", "--store", "memory://", "--port", str(port)]
        run = subprocess.run(
            [sys.executable, "-m", "mcp_tasks.cli", *command],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert run.returncode == UNREACHABLE
    assert run.stderr.splitlines() == [
        f"mcp-tasks serve: cannot listen on 127.0.0.1:{port}: address already in use",
        "pick another --port (0: any free port), or stop what uses this one",
    ]
