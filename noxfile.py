"""Quality gates. `uv run nox` runs every session; each runs inside the uv workspace venv."""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "none"
nox.options.error_on_missing_interpreters = True
nox.options.sessions = ["lint", "typecheck", "tests", "contract-memory", "conformance"]

PYTEST = ("python", "-m", "pytest")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff: lint and formatting."""
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict over every distribution."""
    session.run("mypy")


@nox.session
def tests(session: nox.Session) -> None:
    """Unit and integration tests of the packages (the contract suite runs per backend)."""
    session.run(*PYTEST, "packages", "contract_tests/tests/meta", *session.posargs)


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
