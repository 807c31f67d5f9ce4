"""Quality gates. `uv run nox` runs every session; each runs inside the uv workspace venv."""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "none"
nox.options.error_on_missing_interpreters = True
nox.options.sessions = [
    "lint",
    "typecheck",
    "tests",
    "packaging",
    "contract-memory",
    "contract-sqlite",
    "contract-postgres",
    "conformance",
]

PYTEST = ("python", "-m", "pytest")


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
    """Unit and integration tests of the packages (the contract suite runs per backend)."""
    session.run(*PYTEST, "packages", "contract_tests/tests/meta", *session.posargs)


@nox.session
def packaging(session: nox.Session) -> None:
    """Every distribution's wheel, installed in a fresh venv: demo and contract run there.

    tests/packaging builds each wheel, installs `mcp-tasks[sqlite,postgres]` and
    `mcp-tasks-contract` with ours from those wheels and third-party ones from the package
    index, then runs `mcp-tasks demo` and `mcp-tasks contract memory://` outside the clone;
    and checks that every extra of mcp-tasks named anywhere exists.
    """
    session.run(*PYTEST, "tests/packaging", *session.posargs)


@nox.session(name="contract-memory")
def contract_memory(session: nox.Session) -> None:
    """The shared contract suite against the memory store."""
    session.run(*PYTEST, "contract_tests/tests/test_memory.py", *session.posargs)


@nox.session
def conformance(session: nox.Session) -> None:
    """The official MCP conformance runner's tasks-* scenarios, for every available Store.

    Installs Node 22 and the pinned runner from the npm registry into .cache/conformance/
    (once) and fails on any FAILURE; see tools/conformance.py.
    """
    session.run("python", "tools/conformance.py", *session.posargs)


@nox.session(name="contract-sqlite")
def contract_sqlite(session: nox.Session) -> None:
    """The shared contract suite against the SQLite store (a real file per namespace)."""
    session.run(*PYTEST, "contract_tests/tests/test_sqlite.py", *session.posargs)


@nox.session(name="contract-postgres")
def contract_postgres(session: nox.Session) -> None:
    """The shared contract suite against the Postgres store (MCP_TASKS_TEST_POSTGRES_URL,
    else an embedded server; fails in CI when neither is there)."""
    session.run(*PYTEST, "contract_tests/tests/test_postgres.py", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Store throughput next to the raw drivers on the same servers (not a gate)."""
    session.run("python", "benchmarks/sql_stores.py", *session.posargs)
