"""The official TypeScript tasks client against our conformance fixture, on each Store.

``scenarios.test.mjs`` drives ``conformance/server.py`` with ``@modelcontextprotocol/ext-tasks``
over ``@modelcontextprotocol/client`` (the versions pinned in ``package.json`` and
``package-lock.json``, installed here with ``npm ci`` from the npm registry, run by the
machine's Node): a plain tool, a task completed, a tool error and a protocol error, input
rounds (in a task, several in one update, before the task), cancel, a handoff resumed by
another process (and the client's own ``tasks/cancel`` when a session closes right after
``handoff()``, docs/client.md), ``notifications/tasks`` on ``subscriptions/listen``, an
unknown id.

Node and npm missing: skipped locally, a failure when ``CI`` is set. Postgres is the server
the ``store_servers`` fixture asks the Postgres backend for (a fresh schema per run, dropped
afterwards).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import anyio
import pytest

from mcp_tasks import drop_namespace, namespaced_url

if TYPE_CHECKING:
    from collections.abc import Iterator

HERE = Path(__file__).resolve().parent
FIXTURE_SERVER = HERE.parents[1] / "conformance" / "server.py"
READY = re.compile(r"mcp-tasks: serving on (?P<url>http://\S+)")
#: Starting the fixture imports the SDK: slow on a loaded 2-core machine, never timed.
START_TIMEOUT_S = 120
#: The whole scenario file, bounded so that a hang fails the run.
SCENARIOS_TIMEOUT_S = 300
NODE_MAJOR_AT_LEAST = 20


def needed(message: str) -> NoReturn:
    """Node or npm is not there: skip locally, fail in CI."""
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI is set, so this fails instead of skipping)", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def node() -> str:
    """The machine's Node (20 or later), with the pinned client packages installed beside
    the scenarios by ``npm ci``."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        needed("Node.js 20+ and npm are needed for the TypeScript client's interop tests")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True)
    major = int(version.stdout.strip().lstrip("v").split(".")[0])
    if major < NODE_MAJOR_AT_LEAST:
        needed(f"Node.js {NODE_MAJOR_AT_LEAST}+ is needed, found {version.stdout.strip()}")
    subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=HERE, check=True)
    return node


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The fixture's Store: memory, a SQLite file, a fresh Postgres schema."""
    if request.param == "memory":
        yield "memory://"
        return
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'tasks.db'}"
        return
    server = request.getfixturevalue("store_servers").url("postgresql")
    url = namespaced_url(server, "mcpt_ts_" + secrets.token_hex(6))
    try:
        yield url
    finally:
        anyio.run(drop_namespace, url)


@contextmanager
def fixture_server(store_url: str, log: Path) -> Iterator[str]:
    """``conformance/server.py`` on ``store_url`` on a port of its choosing: its URL, once it
    says it is serving; stopped afterwards. Its stderr goes to ``log``."""
    with subprocess.Popen(
        [sys.executable, str(FIXTURE_SERVER), "--store", store_url, "--port", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:  # its exit closes the pipe and waits for the process
        found: list[str] = []
        ready = threading.Event()

        def read() -> None:
            assert process.stderr is not None
            with log.open("w", encoding="utf-8") as kept:
                for line in process.stderr:
                    kept.write(line)
                    kept.flush()
                    if not found and (match := READY.search(line)):
                        found.append(match.group("url"))
                        ready.set()
            ready.set()  # ended before it was ready: the check below says so

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            ready.wait(START_TIMEOUT_S)
            if not found:
                raise AssertionError(f"the fixture server did not start:\n{log.read_text()}")
            yield found[0]
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
            reader.join(timeout=5)


def test_the_typescript_tasks_client_scenarios_pass(
    node: str, store_url: str, tmp_path: Path
) -> None:
    """Every scenario of scenarios.test.mjs passes against the fixture on this Store."""
    with fixture_server(store_url, tmp_path / "server.log") as url:
        run = subprocess.run(
            [node, "--test", "--test-reporter=spec", "scenarios.test.mjs"],
            cwd=HERE,
            env={**os.environ, "MCP_TASKS_INTEROP_URL": url},
            capture_output=True,
            text=True,
            timeout=SCENARIOS_TIMEOUT_S,
            check=False,
        )
    print(run.stdout, run.stderr, sep="\n")
    backend = store_url.split(":", maxsplit=1)[0]
    assert run.returncode == 0, f"scenarios failed on {backend}:\n{run.stdout}"
