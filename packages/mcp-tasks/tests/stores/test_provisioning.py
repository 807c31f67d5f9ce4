"""How a backend provisions its test server: the entry-point object is the scheme's
provisioner, and the policy (the environment's server, else one started, else the reason)."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest

from mcp_tasks.stores.memory import backend as memory_backend
from mcp_tasks.stores.opening import UnknownStoreScheme
from mcp_tasks.stores.provisioning import (
    EnvTestServer,
    NoTestServer,
    ProvisionsTestStores,
    first_test_server,
    provisioner_for,
    server_url_env,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from contextlib import AbstractContextManager

ENV = "MCP_TASKS_TEST_PROVISIONING_URL"


def test_every_in_repo_scheme_is_provisioned_by_its_entry_point_object() -> None:
    """Each scheme's provisioner is its backend's entry-point object, one per backend."""
    by_backend = {
        "memory": ["memory"],
        "sqlite": ["sqlite"],
        "postgres": ["postgresql", "postgres"],
        "redis": ["redis", "rediss", "redis+unix"],
        "mongodb": ["mongodb", "mongodb+srv"],
    }
    for schemes in by_backend.values():
        found = [provisioner_for(scheme) for scheme in schemes]
        assert all(isinstance(p, ProvisionsTestStores) for p in found), schemes
        assert not any(isinstance(p, EnvTestServer) for p in found), schemes
        assert all(p is found[0] for p in found), schemes
    assert provisioner_for("MEMORY") is memory_backend


def test_an_unregistered_scheme_has_no_provisioner() -> None:
    """A scheme no installed package registers is refused as when opening a store."""
    with pytest.raises(UnknownStoreScheme, match=r"nosuchstore://"):
        provisioner_for("nosuchstore")


def test_the_environment_variable_is_named_after_the_kind() -> None:
    """MCP_TASKS_TEST_<KIND>_URL, a scheme's punctuation as ``_``."""
    assert server_url_env("postgres") == "MCP_TASKS_TEST_POSTGRES_URL"
    assert server_url_env("mongodb+srv") == "MCP_TASKS_TEST_MONGODB_SRV_URL"


def test_the_environments_server_comes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """A URL in the environment is used, and no source is started."""
    monkeypatch.setenv(ENV, "kind://env/db")
    started: list[str] = []

    @contextmanager
    def source() -> Iterator[str | None]:
        started.append("source")
        yield "kind://started/db"

    with first_test_server("Kind", ENV, None, [source], "never said") as url:
        assert url == "kind://env/db"
    assert started == []


def test_a_named_server_that_does_not_answer_is_no_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server the user named is never silently replaced by one started."""
    monkeypatch.setenv(ENV, "kind://down/db")

    @contextmanager
    def source() -> Iterator[str | None]:
        yield "kind://started/db"

    with (
        pytest.raises(NoTestServer) as raised,
        first_test_server("Kind", ENV, lambda url: f"{url} refused", [source], "never said"),
    ):
        pass
    assert str(raised.value) == (
        f"No Kind server for the tests: {ENV} does not answer (kind://down/db refused)"
    )
    assert (raised.value.store, raised.value.reason) == (
        "Kind",
        f"{ENV} does not answer (kind://down/db refused)",
    )


def test_the_first_source_that_starts_a_server_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the environment's server the sources are tried in order; the one that yields a
    URL serves, and is stopped when the session's context exits."""
    monkeypatch.delenv(ENV, raising=False)
    events: list[str] = []

    def source(name: str, url: str | None) -> Callable[[], AbstractContextManager[str | None]]:
        @contextmanager
        def start() -> Iterator[str | None]:
            events.append(f"start {name}")
            yield url
            events.append(f"stop {name}")

        return start

    sources = [source("a", None), source("b", "kind://b/db"), source("c", "kind://c/db")]
    with first_test_server("Kind", ENV, None, sources, "never said") as url:
        assert url == "kind://b/db"
        assert events == ["start a", "start b"]
    assert events == ["start a", "start b", "stop b", "stop a"]


def test_no_server_at_all_says_how_to_provide_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """No environment's server and no source that starts one: the reason given."""
    monkeypatch.delenv(ENV, raising=False)
    with (
        pytest.raises(NoTestServer, match=rf"^No Kind server for the tests: set {ENV}$"),
        first_test_server("Kind", ENV, None, [], f"set {ENV}"),
    ):
        pass


def test_a_backend_without_a_provisioner_gets_the_environments_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fallback reads MCP_TASKS_TEST_<SCHEME>_URL and starts nothing."""
    fallback = EnvTestServer("my+store")
    assert fallback == EnvTestServer("my+store")
    monkeypatch.delenv("MCP_TASKS_TEST_MY_STORE_URL", raising=False)
    with (
        pytest.raises(NoTestServer, match="set MCP_TASKS_TEST_MY_STORE_URL"),
        fallback.test_server(),
    ):
        pass
    monkeypatch.setenv("MCP_TASKS_TEST_MY_STORE_URL", "my+store://host/db")
    with fallback.test_server() as url:
        assert fallback.test_store_url(url) == "my+store://host/db"


def test_sqlite_provisions_a_file_of_its_own_deleted_afterwards(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SQLite's "server" is a file in a folder of the session's own, removed at its end."""
    monkeypatch.delenv("MCP_TASKS_TEST_SQLITE_URL", raising=False)
    with provisioner_for("sqlite").test_server() as url:
        folder = Path(urlsplit(url).path).parent
        assert url.startswith("sqlite:///")
        assert folder.is_dir()
    assert not folder.exists()


def test_memory_is_its_own_server() -> None:
    """The memory store's tests need no server: ``memory://``."""
    with memory_backend.test_server() as url:
        assert memory_backend.test_store_url(url) == "memory://"
