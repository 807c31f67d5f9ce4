"""The MariaDB / MySQL store of ``examples/mysql_store``, installed as a third party's user
would install it: our wheels and the example into a fresh virtualenv, nothing else of the
clone. There it passes the whole contract suite (pytest on its own test file), the create
tests through ``mcp-tasks contract mysql://…`` (the command line's own route: the store
found by its entry point, a table prefix per test), the conformance runner's tasks
scenarios on a server on ``mysql://``, and the crash test (two servers on one database,
one SIGKILLed mid-task).

Only the ``mysql-example`` nox session runs it, against ``MCP_TASKS_TEST_MYSQL_URL``; without
it (or uv, or the package index) it skips locally and fails when ``CI`` is set.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest
from wheelhouse import (
    REPO,
    Installed,
    bin_dir,
    clean_env,
    passed_every_test,
    run,
    unavailable,
    wheel_venv,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

EXAMPLE = REPO / "examples" / "mysql_store"
MYSQL_URL_ENV = "MCP_TASKS_TEST_MYSQL_URL"
#: The contract run's xdist workers.
WORKERS = ("-n", "2")
#: What the command line's run selects: the tests of one operation.
CLI_TESTS = ("-k", "test_create")
#: The conformance runner's ten tasks scenarios hold this many checks.
TASKS_CHECKS = 44


@pytest.fixture(scope="module")
def mysql_url() -> str:
    url = os.environ.get(MYSQL_URL_ENV)
    if not url:
        unavailable(f"set {MYSQL_URL_ENV}=mysql://root@127.0.0.1:3306/test")
    return url


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """Our wheels and the example with its test extra, in a fresh virtualenv."""
    requirement = f"mcp-tasks-mysql-example[test] @ {EXAMPLE.as_uri()}"
    return wheel_venv(tmp_path_factory.mktemp("mysql-example"), [requirement])


@dataclass
class Background:
    """A command running in the example's virtualenv, its output in a file."""

    process: subprocess.Popen[str]
    output: Path
    report: Path

    def finished(self, timeout: float) -> str:
        """Its output, once it exited 0 (else the test fails with the output)."""
        try:
            self.process.wait(timeout)
        finally:
            self.process.kill()  # a no-op once it exited
        text = self.output.read_text(encoding="utf-8", errors="replace")
        assert self.process.returncode == 0, f"exited {self.process.returncode}\n{text}"
        return text


def start(command: list[str], folder: Path, env: dict[str, str], cwd: Path) -> Background:
    report, output = folder / "report.xml", folder / "output.txt"
    with output.open("w", encoding="utf-8") as sink:
        process = subprocess.Popen(
            [*command, f"--junitxml={report}"],
            cwd=cwd,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
        )
    return Background(process, output, report)


@pytest.fixture(scope="module")
def contract_runs(
    installed: Installed, mysql_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Background]]:
    """The contract suite by subclassing and the create tests through the command line,
    started at once (each in namespaces of its own): most of their time is waiting on the
    server's clock and its disk. The whole suite runs once: through the command line it
    would run the same tests of the same store again."""
    env = {**clean_env(installed.venv), MYSQL_URL_ENV: mysql_url}
    runs = {
        "pytest": start(
            [str(installed.python), "-m", "pytest", str(EXAMPLE / "tests"), *WORKERS],
            tmp_path_factory.mktemp("pytest"),
            env,
            installed.outside,
        ),
        "cli": start(
            [str(bin_dir(installed.venv) / "mcp-tasks"), "contract", mysql_url, "--", *CLI_TESTS],
            tmp_path_factory.mktemp("cli"),
            env,
            installed.outside,
        ),
    }
    yield runs
    for started in runs.values():
        started.process.kill()


def test_the_contract_suite_passes_by_subclassing(contract_runs: dict[str, Background]) -> None:
    """pytest on the example's own test files (a StoreContract subclass, and the store's own
    tests): every test runs and passes."""
    suite = contract_runs["pytest"]
    suite.finished(timeout=600)
    print(f"pytest examples/mysql_store/tests: {passed_every_test(suite.report)} passed")


def test_the_contract_suite_passes_through_the_cli(contract_runs: dict[str, Background]) -> None:
    """``mcp-tasks contract mysql://…`` finds the store by its entry point, gives each test a
    table prefix of its own, and every create test it selects passes."""
    suite = contract_runs["cli"]
    output = suite.finished(timeout=600)
    passed = passed_every_test(suite.report)
    # The store offers namespaces; the other optional behaviours are reported not offered.
    summary = re.search(r"^(\d+) passed(?:, \d+ deselected)? in [\d.]+s", output, re.MULTILINE)
    assert summary is not None, output
    assert int(summary.group(1)) == passed
    assert output.splitlines()[-1].endswith("not offered: O-CLOCK, O-NOTIFIER, O-RESTART")
    print(f"mcp-tasks contract mysql://: {passed} passed")


def test_the_conformance_tasks_scenarios_pass_on_mysql(
    installed: Installed, mysql_url: str
) -> None:
    """The conformance fixture server on ``mysql://``: the runner's ten tasks scenarios,
    every check a success."""
    done = run(
        [str(installed.python), str(REPO / "conformance" / "run.py"), "--store", mysql_url],
        cwd=REPO,
        env=clean_env(installed.venv),
        timeout=600,
    )
    checks = f"tasks 10/10 scenarios, {TASKS_CHECKS}/{TASKS_CHECKS} SUCCESS checks"
    assert checks in done.stdout, done.stdout


def test_a_killed_server_s_tasks_are_finished_by_the_other(
    installed: Installed, mysql_url: str, tmp_path: Path
) -> None:
    """The crash test on ``mysql://`` (packages/mcp-tasks/tests/durable): two servers on one
    database, the first SIGKILLed mid-task; the other runs every task again, within its
    lease + 2 s, and commits each once."""
    crash_tests = REPO / "packages" / "mcp-tasks" / "tests" / "durable" / "test_crash_recovery.py"
    report = tmp_path / "crash.xml"
    run(
        [
            str(installed.python),
            "-m",
            "pytest",
            str(crash_tests),
            "-k",
            "sigkill and serve",
            f"--junitxml={report}",
        ],
        cwd=REPO,
        env={**clean_env(installed.venv), "MCP_TASKS_CRASH_STORE_URL": mysql_url},
        timeout=600,
    )
    assert passed_every_test(report) == 1
