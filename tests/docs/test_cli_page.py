"""docs/cli.md, run: each transcript is what its command prints today (transcripts.py says
what is normalised), and each command of its ``bash`` blocks runs as written.

The commands run as the reader runs them, in a folder of their own: ``mcp-tasks`` is this
virtualenv's (``uv run`` is how a clone runs it), a server the page talks to at
127.0.0.1:8000 is served on a free port, and the page's stand-ins for the reader's own
things are the test's: ``myapp:mcp`` is Get started's hello.py, and the Postgres at
``postgresql://tasks@db/tasks`` is the test's (MCP_TASKS_TEST_POSTGRES_URL), in a schema of
its own that is dropped afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from typing import TYPE_CHECKING

import anyio
import pytest
from conftest import write_tour
from markdown_blocks import REPO, PageBlocks
from transcripts import Background, Transcript, background, differences, free_port, run

from mcp_tasks import drop_namespace, namespaced_url
from mcp_tasks.domain.clock import system_clock
from mcp_tasks_contract.suite.stats import OPTIONS, populate
from mcp_tasks_sqlite import SQLiteTaskStore

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

PAGE = PageBlocks("docs/cli.md")
NOT_INSTALLED = Transcript.of(PAGE.take("$ mcp-tasks migrate --store postgresql://"))
ANSWER_REFUSED = Transcript.of(PAGE.take("--answer confirm=true\n"))
NEEDS_INPUT = Transcript.of(PAGE.take("$ mcp-tasks call http://127.0.0.1:8000/mcp deploy env=qa\n"))
GAVE_UP = Transcript.of(PAGE.take("--reconnect-for 5\n"))
DOCTOR = Transcript.of(PAGE.take("$ mcp-tasks doctor"))
STATS = Transcript.of(PAGE.take("$ mcp-tasks stats --store sqlite:///tasks.db"))
NOT_MIGRATED = Transcript.of(PAGE.take("$ mcp-tasks stats --store sqlite:///fresh.db"))
PAGE.explain(
    "mcp-tasks serve: app:mcp does not run its tasks",
    "an app of its own: packages/mcp-tasks/tests/cli/test_cli_serve.py checks these lines",
)
PAGE.explain(
    "--answer colour does not fit the question",
    "a tool of its own: packages/mcp-tasks/tests/cli/test_cli_answer_check.py runs it",
)
PAGE.explain(
    'MCP_TASKS_ENCRYPTION_KEYS="new:…,old:…" mcp-tasks rekey',
    "a store written under two keys: packages/mcp-tasks/tests/stores/test_rekey.py runs "
    "rekey and its command (the counts depend on the store)",
)
SERVE = PAGE.take("mcp-tasks serve --store memory://demo")
WORKER = PAGE.take("mcp-tasks worker myapp:mcp")
CONTRACT = PAGE.take("mcp-tasks contract memory://")

PAGE_POSTGRES = "postgresql://tasks@db/tasks"
#: The page's contract example names the Postgres of the test environment's README.
PAGE_TEST_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
SERVING = "Application startup complete"


def commands(block_text: str) -> list[str]:
    """A bash block's commands, without comments and without ``uv run`` (a clone's way)."""
    found = []
    for line in block_text.splitlines():
        command = line.split("  #", 1)[0].strip()
        if command:
            found.append(command.removeprefix("uv run "))
    return found


def service_url(variable: str) -> str:
    """A test service's URL; fails in CI when it is unset, else skips."""
    url = os.environ.get(variable)
    if not url:
        if os.environ.get("CI"):
            pytest.fail(f"{variable} is not set (required in CI)")
        pytest.skip(f"{variable} is not set")
    return url


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """`mcp-tasks serve --store memory://` (the demo tools) on a free port: the port."""
    port = free_port()
    folder = tmp_path_factory.mktemp("demo")
    with background("mcp-tasks serve --store memory://", folder, SERVING, port=port):
        yield port


def test_a_store_that_is_not_installed_is_named_with_how_to_install_it(tmp_path: Path) -> None:
    """In a virtualenv holding mcp-tasks alone (installed from the clone, its dependencies
    from uv's cache), the page's migrate names the missing store; exit 2."""
    venv = tmp_path / "venv"
    uv = shutil.which("uv")
    assert uv is not None, "uv runs the docs session, so it is on PATH"
    python = str(REPO / ".venv" / "bin" / "python")
    subprocess.run([uv, "venv", "-q", "--python", python, str(venv)], check=True, timeout=120)
    install = [uv, "pip", "install", "-q", "--offline", "--python", str(venv / "bin" / "python")]
    subprocess.run([*install, str(REPO / "packages" / "mcp-tasks")], check=True, timeout=300)
    code, output = run(NOT_INSTALLED.command, tmp_path, bin_dir=venv / "bin")
    assert code == 2, output
    problem = differences(NOT_INSTALLED, output)
    assert problem is None, problem


def test_an_answer_the_wire_cannot_carry_is_refused_before_calling(tmp_path: Path) -> None:
    """Nothing listens on the port: the refusal comes before any call; exit 2."""
    code, output = run(ANSWER_REFUSED.command, tmp_path, port=free_port())
    assert code == 2, output
    problem = differences(ANSWER_REFUSED, output)
    assert problem is None, problem


def test_input_nobody_answers_leaves_the_task_waiting(demo_server: int, tmp_path: Path) -> None:
    """The demo's deploy asks to confirm; with no terminal and no --answer, `call` prints
    the question and the command that answers it; exit 5."""
    code, output = run(NEEDS_INPUT.command, tmp_path, port=demo_server)
    assert code == 5, output
    problem = differences(NEEDS_INPUT, output, port=demo_server)
    assert problem is None, problem


def test_a_server_gone_for_good_makes_call_give_up_naming_the_command_that_follows_it(
    tmp_path: Path,
) -> None:
    """The server stops while `call` follows a long sleep; `call` tries to reconnect for
    5 s, gives up and prints how to follow the task later; exit 6."""
    port = free_port()
    with background("mcp-tasks serve --store memory://", tmp_path, SERVING, port=port) as server:
        call = Background(GAVE_UP.command, tmp_path, port=port)
        try:
            call.wait_for("task: working — Sleeping")
            assert server.stop() == 0
            assert call.finish() == 6, call.text
        finally:
            call.kill()
    problem = differences(GAVE_UP, call.text, port=port)
    assert problem is None, problem


def test_doctor_on_redis_checks_the_server_and_the_namespace(tmp_path: Path) -> None:
    """On the test's Redis (the page's 127.0.0.1:6379/0), in a prefix of its own that
    reads as the page's ``demo``; the namespace is dropped afterwards."""
    redis = service_url("MCP_TASKS_TEST_REDIS_URL")
    page_url = "redis://127.0.0.1:6379/0?prefix=demo"
    assert page_url in DOCTOR.command
    url = namespaced_url(redis, f"docs_{uuid.uuid4().hex[:8]}")
    try:
        code, output = run(DOCTOR.command.replace(page_url, url), tmp_path)
    finally:
        anyio.run(drop_namespace, url)
    assert code == 0, output
    prefix = url.rsplit("prefix=", 1)[1]
    replacements = {url: page_url, f"prefix '{prefix}'": "prefix 'demo'"}
    problem = differences(DOCTOR, output, replacements=replacements)
    assert problem is None, problem


async def wait_past(epoch_ms: int) -> None:
    """The SQLite store keeps the system clock: wait until it is past ``epoch_ms``."""
    left_ms = epoch_ms + 1 - system_clock()
    if left_ms > 0:
        await anyio.sleep((left_ms + 1) / 1000)
    assert system_clock() > epoch_ms


def test_stats_counts_a_store_of_every_kind_of_task(tmp_path: Path) -> None:
    """tasks.db holds the contract suite's stats population (10 live tasks in every state,
    one expired, three owners); the page's `stats` counts them; exit 0."""

    async def fill() -> None:
        async with SQLiteTaskStore(tmp_path / "tasks.db", OPTIONS) as store:
            await populate(store, wait_past)

    anyio.run(fill)
    code, output = run(STATS.command, tmp_path)
    assert code == 0, output
    problem = differences(STATS, output, replacements={str(tmp_path): "/srv"})
    assert problem is None, problem


def test_stats_on_a_file_never_migrated_says_so(tmp_path: Path) -> None:
    """`stats` on a SQLite file without tables: nothing stored yet, and the command that
    creates them; exit 6."""
    code, output = run(NOT_MIGRATED.command, tmp_path)
    assert code == 6, output
    problem = differences(NOT_MIGRATED, output, replacements={str(tmp_path): "/srv"})
    assert problem is None, problem


def test_serve_serves_the_demo_tools_and_an_app_by_module_attr(tmp_path: Path) -> None:
    """Each serve command of the page starts serving, says so in its banner, and stops on
    Ctrl-C with exit 0. The app one runs in a copy of examples/ (its default SQLite file
    then lands in the copy)."""
    demo, app = commands(SERVE.text)
    port = free_port()
    with background(demo, tmp_path, SERVING, port=port) as served:
        banner = f"mcp-tasks: serving on http://127.0.0.1:{port}/mcp (store: memory://demo)"
        assert banner in served.text
        assert served.stop() == 0
    folder, serve_app = app.split(" && ")
    assert folder == "cd examples"
    examples = tmp_path / "examples"
    shutil.copytree(REPO / "examples", examples, ignore=shutil.ignore_patterns("mysql_store"))
    with background(serve_app.removeprefix("uv run "), examples, SERVING, port=port) as served:
        assert f"mcp-tasks: serving on http://127.0.0.1:{port}/mcp" in served.text
        assert served.stop() == 0


def test_a_worker_runs_an_app_on_postgres(tmp_path: Path) -> None:
    """The page's worker (its myapp:mcp is Get started's hello.py, its Postgres the test's,
    in a schema of its own) starts, says so, and stops on Ctrl-C with exit 0."""
    (command,) = commands(WORKER.text)
    url = namespaced_url(service_url("MCP_TASKS_TEST_POSTGRES_URL"), f"docs_{uuid.uuid4().hex[:8]}")
    write_tour(tmp_path)
    (tmp_path / "myapp.py").write_text((tmp_path / "hello.py").read_text(), encoding="utf-8")
    try:
        with background(
            command.replace(PAGE_POSTGRES, url), tmp_path, "mcp-tasks: worker "
        ) as worker:
            assert "running (store: postgresql://" in worker.text
            assert worker.stop() == 0
    finally:
        anyio.run(drop_namespace, url)


@pytest.mark.parametrize("command", commands(CONTRACT.text))
def test_the_contract_commands_pass(command: str, tmp_path: Path) -> None:
    """Each contract command of the page, as written, ends with no rule failed; exit 0;
    --json writes the rules. (The memory and Postgres ones run the create tests only: see
    below.)"""
    if PAGE_TEST_POSTGRES in command:
        command = command.replace(PAGE_TEST_POSTGRES, service_url("MCP_TASKS_TEST_POSTGRES_URL"))
        # The whole suite on Postgres takes minutes (nox -s contract-postgres runs it): here
        # the tests of one operation, through the command line exactly as the page gives it.
        command += " -- -k test_create"
    elif command == "mcp-tasks contract memory://":
        # The whole suite through this very command, on the real clock, takes a minute and
        # a half: nox -s packaging runs it from the installed wheels
        # (tests/packaging/test_wheel_install.py), so here the tests of one operation.
        command += " -- -k test_create"
    code, output = run(command, tmp_path)
    assert code == 0, output[-3000:]
    assert "mcp-tasks contract: no rule failed; " in output.splitlines()[-1]
    if "--json rules.json" in command:
        rules = json.loads((tmp_path / "rules.json").read_text())
        assert rules["failed"] == {}
        assert rules["passed"]
