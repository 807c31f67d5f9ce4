"""Repository-wide pytest policy: in CI a test that did not run and pass fails the run.

Backends already fail instead of skipping when their server is missing and ``CI`` is set;
this is the net under that: no test anywhere may quietly not run in CI. A skip did not
run; an xfail ran and failed, yet leaves the run green; an xpass (only a non-strict
marker lets one through, ``xfail_strict`` fails the others already) passed while marked
as failing. Each of them fails a CI run.

Also the one home of the fixtures every test folder shares: the event loop the async tests
run on (``anyio_backend``), a fresh store namespace per test (``namespace``), and each
backend's test server as it provisions it (``store_servers``, the contract plugin's
fixture). A backend's own conftest keeps what is its own (how it opens a store on the
namespace, what it drops afterwards).
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

import pytest

from mcp_tasks_contract import new_namespace

if TYPE_CHECKING:
    from collections.abc import Iterator

    from mcp_tasks_contract import StoreServers

#: The terminal reporter's outcome keys of tests that did not simply run and pass.
NOT_CLEAN = ("skipped", "xfailed", "xpassed")


@pytest.fixture(autouse=True)
def root_log_handlers_restored() -> Iterator[None]:
    """A stderr handler a test's code puts on the root logger (``mcp-tasks serve`` run
    in-process sets its logging up) is taken off after the test: it is bound to the stderr
    pytest captured for that test, which is closed by the time a later test logs, and
    every record would print a "Logging error" traceback there."""
    root = logging.getLogger()
    before, level = set(root.handlers), root.level
    yield
    for handler in root.handlers[:]:
        if type(handler) is logging.StreamHandler and handler not in before:
            root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture
def anyio_backend() -> str:
    """Every async test runs on asyncio (the backends' drivers are asyncio libraries)."""
    return "asyncio"


@pytest.fixture
def namespace() -> str:
    """A fresh store namespace for this test: a SQL schema, a key or collection prefix."""
    return new_namespace()


@pytest.fixture(scope="session")
def postgres_url(store_servers: StoreServers) -> str:
    """The session's PostgreSQL server (``mcp_tasks_postgres.provision``)."""
    return store_servers.url("postgresql")


@pytest.fixture(scope="session")
def redis_url(store_servers: StoreServers) -> str:
    """The session's Redis server (``mcp_tasks_redis.provision``)."""
    return store_servers.url("redis")


@pytest.fixture(scope="session")
def mongodb_url(store_servers: StoreServers) -> str:
    """The session's MongoDB server (``mcp_tasks_mongodb.provision``); stores open on
    ``store_servers.store_url("mongodb")``."""
    return store_servers.url("mongodb")


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "slow: runs for tens of seconds (servers started and killed, soaks, waits on real "
        "leases): started before the others",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The ``slow`` tests first, each group in its own order: a parallel run (xdist hands
    each worker its next test as it frees one) has its long tests running from the start,
    under the short ones, rather than one of them still running alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not os.environ.get("CI") or exitstatus != pytest.ExitCode.OK:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    stats = reporter.stats if reporter is not None else {}
    found = {outcome: stats.get(outcome, []) for outcome in NOT_CLEAN}
    found = {outcome: reports for outcome, reports in found.items() if reports}
    if found:
        counts = ", ".join(f"{len(reports)} {outcome}" for outcome, reports in found.items())
        reports = [report for outcome in found for report in found[outcome]]
        names = ", ".join(getattr(report, "nodeid", "?") for report in reports[:5])
        print(f"\nCI: {counts} ({names}); in CI every test must run and pass.")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
