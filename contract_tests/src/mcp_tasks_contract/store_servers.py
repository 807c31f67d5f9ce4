"""Where tests get real store servers: each backend's own provisioner, asked by scheme.

The suite knows no backend: :class:`StoreServers` (the session fixture ``store_servers``,
registered by the plugin) asks the backend registered for a scheme
(:func:`mcp_tasks.stores.provisioning.provisioner_for`) for its test server, once per
session, and stops it at the session's end. Where a backend finds its server (its
``MCP_TASKS_TEST_<KIND>_URL``, an embedded server, a container) is the backend's own
``provision`` module's to say. No server: the test skips with the backend's reason, and
**fails** when ``CI`` is set, so CI can never pass by skipping a backend (the repository's
root ``conftest.py`` also fails a CI run in which any test skipped).

A backend's tests name their server in a conftest::

    @pytest.fixture(scope="session")
    def postgres_url(store_servers: StoreServers) -> str:
        return store_servers.url("postgresql")
"""

from __future__ import annotations

import os
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, NoReturn, TypeVar

import pytest

from mcp_tasks.stores.provisioning import NoTestServer, ProvisionsTestStores, provisioner_for

if TYPE_CHECKING:
    from collections.abc import Iterator
    from contextlib import AbstractContextManager

T = TypeVar("T")


def unavailable(store: str, reason: str) -> NoReturn:
    """No ``store`` server, for ``reason`` (a :class:`NoTestServer`'s): skip locally, fail
    in CI (``CI`` set)."""
    message = str(NoTestServer(store, reason))
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI is set, so this fails instead of skipping)", pytrace=False)
    pytest.skip(message)


@contextmanager
def provided(server: AbstractContextManager[T]) -> Iterator[T]:
    """``server`` (a backend's own server a test starts, stops and configures), entered; a
    :class:`NoTestServer` on entering it is :func:`unavailable`."""
    with ExitStack() as stack:
        try:
            entered = stack.enter_context(server)
        except NoTestServer as problem:
            unavailable(problem.store, problem.reason)
        yield entered


class StoreServers:
    """The test servers of one session, by backend: each asked of the backend's provisioner
    at first use (one server for all of a backend's schemes), stopped when ``stack``
    closes. A server that is not there is asked for once; every test that wants it is
    :func:`unavailable` with the same reason."""

    def __init__(self, stack: ExitStack) -> None:
        self._stack = stack
        self._urls: dict[ProvisionsTestStores, str] = {}
        self._missing: dict[ProvisionsTestStores, NoTestServer] = {}

    def url(self, scheme: str) -> str:
        """The URL of the session's server for ``scheme`` (its default namespace); what
        the backend's driver connects to."""
        provisioner = provisioner_for(scheme)
        missing = self._missing.get(provisioner)
        if missing is None and provisioner not in self._urls:
            try:
                self._urls[provisioner] = self._stack.enter_context(provisioner.test_server())
            except NoTestServer as problem:
                self._missing[provisioner] = missing = problem
        if missing is not None:
            unavailable(missing.store, missing.reason)
        return self._urls[provisioner]

    def store_url(self, scheme: str) -> str:
        """The URL stores are opened on at :meth:`url`'s server (the backend may add
        settings for a test server, as a longer bound on a slow one)."""
        return provisioner_for(scheme).test_store_url(self.url(scheme))


@pytest.fixture(scope="session")
def store_servers() -> Iterator[StoreServers]:
    """Every backend's test server this session asks for (see :class:`StoreServers`)."""
    with ExitStack() as stack:
        yield StoreServers(stack)
