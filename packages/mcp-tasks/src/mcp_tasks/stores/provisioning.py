"""How a backend provisions its own test server (SQLAlchemy's ``provision.py``, per backend).

A backend's ``mcp_tasks.stores`` entry-point object may also be a
:class:`ProvisionsTestStores`: it then says where tests find a server of its kind, and the
generic contract suite (``mcp_tasks_contract``) asks it through :func:`provisioner_for`,
knowing no backend itself. The policy each backend follows, first match wins:

1. the ``MCP_TASKS_TEST_<KIND>_URL`` environment variable (:func:`server_url_env`); a URL the
   user named that does not answer is :class:`NoTestServer`, never silently replaced;
2. a server the backend starts itself (an embedded server from a test-only package, a
   testcontainers container where a Docker engine answers: :func:`container_server`);
3. none: :class:`NoTestServer`, whose reason says how to provide one. The contract suite
   skips the test with that reason, and fails it when ``CI`` is set.

A backend without a provisioner still gets the first rule: :func:`provisioner_for` returns
one that reads ``MCP_TASKS_TEST_<SCHEME>_URL``.
"""

from __future__ import annotations

import importlib
import os
import re
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from mcp_tasks.domain.errors import MCPTasksError
from mcp_tasks.stores.opening import ENTRY_POINT_GROUP, UnknownStoreScheme

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence


class NoTestServer(MCPTasksError, LookupError):
    """No server of this kind for the tests; the reason says how to provide one."""

    def __init__(self, store: str, reason: str) -> None:
        self.store = store
        self.reason = reason
        super().__init__(f"No {store} server for the tests: {reason}")


@runtime_checkable
class ProvisionsTestStores(Protocol):
    """What a backend's entry-point object offers to provision its tests' servers.

    A test session asks :meth:`test_server` once and opens every store on
    :meth:`test_store_url`; each test takes a namespace of its own there (the backend's
    ``namespaced``) and drops it afterwards (its ``drop``).
    """

    def test_server(self) -> AbstractContextManager[str]:
        """A server for one test session, as the URL of its default namespace: the
        ``MCP_TASKS_TEST_<KIND>_URL`` one, else one this backend starts (and stops when
        the context exits).

        Raises:
            NoTestServer: none is there, or the environment's does not answer; the
                reason says how to provide one.
        """
        ...

    def test_store_url(self, server_url: str, /) -> str:
        """The URL tests open their stores on at ``server_url`` (a :meth:`test_server`
        URL): that URL itself, or with settings a test server needs (a longer bound on
        a slow embedded server)."""
        ...


def server_url_env(kind: str) -> str:
    """The environment variable naming a test server of ``kind`` (``postgres`` →
    ``MCP_TASKS_TEST_POSTGRES_URL``)."""
    return f"MCP_TASKS_TEST_{re.sub(r'[^A-Z0-9]', '_', kind.upper())}_URL"


@contextmanager
def first_test_server(
    store: str,
    env: str,
    answers: Callable[[str], str | None] | None,
    sources: Sequence[Callable[[], AbstractContextManager[str | None]]],
    how: str,
) -> Iterator[str]:
    """The policy above for one backend: the URL in ``env`` (when ``answers`` says why it
    does not answer, :class:`NoTestServer`), else the first of ``sources`` that yields a
    URL, else :class:`NoTestServer` saying ``how``."""
    url = os.environ.get(env)
    if url:
        problem = None if answers is None else answers(url)
        if problem is not None:
            raise NoTestServer(store, f"{env} does not answer ({problem})")
        yield url
        return
    with ExitStack() as stack:
        for source in sources:
            found = stack.enter_context(source())
            if found is not None:
                yield found
                return
    raise NoTestServer(store, how)


@contextmanager
def container_server(
    module: str, make: Callable[[Any], Any], url_of: Callable[[Any], str]
) -> Iterator[str | None]:
    """A testcontainers container (``make(module)``, started) and its URL, stopped at the
    end; ``None`` when testcontainers (a test-only package) is not installed or no Docker
    engine answers."""
    try:
        package = importlib.import_module(module)
    except ImportError:
        yield None
        return
    try:
        container = make(package)
        container.start()
    except Exception:  # no Docker engine answering: try the next source
        yield None
        return
    try:
        yield url_of(container)
    finally:
        container.stop()


@dataclass(frozen=True)
class EnvTestServer:
    """The provisioner of a backend that has none: ``MCP_TASKS_TEST_<SCHEME>_URL`` only."""

    scheme: str

    @property
    def env(self) -> str:
        return server_url_env(self.scheme)

    def test_server(self) -> AbstractContextManager[str]:
        return first_test_server(
            f"{self.scheme}://",
            self.env,
            None,
            [],
            f"set {self.env} (its backend starts no test server of its own)",
        )

    def test_store_url(self, server_url: str, /) -> str:
        return server_url


def provisioner_for(scheme: str) -> ProvisionsTestStores:
    """The test-server provisioner of the backend registered for ``scheme``: its
    ``mcp_tasks.stores`` entry-point object when that is a :class:`ProvisionsTestStores`,
    else an :class:`EnvTestServer`. Schemes of one backend (``postgres``, ``postgresql``)
    have one provisioner: equal, and of one hash.

    Raises:
        UnknownStoreScheme: no installed package registers ``scheme``.
    """
    scheme = scheme.lower()
    for entry in entry_points(group=ENTRY_POINT_GROUP, name=scheme):
        loaded: object = entry.load()
        if isinstance(loaded, ProvisionsTestStores):
            return loaded
        return EnvTestServer(scheme)
    raise UnknownStoreScheme(f"No store is registered for {scheme}://")
