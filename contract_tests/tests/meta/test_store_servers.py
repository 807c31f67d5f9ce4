"""The suite's ``store_servers``: one server per backend, asked of the backend by scheme; no
server skips with the backend's reason, and fails when ``CI`` is set."""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest

from mcp_tasks.stores.provisioning import NoTestServer
from mcp_tasks_contract import StoreServers
from mcp_tasks_contract.store_servers import provided, unavailable

if TYPE_CHECKING:
    from collections.abc import Iterator

#: A Redis URL nothing listens on (port 1 is never a Redis server's).
REFUSED_REDIS = "redis://127.0.0.1:1/0"


def test_one_server_per_backend_for_the_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend's schemes share its server, started at first use and stopped with the
    session."""
    monkeypatch.delenv("MCP_TASKS_TEST_SQLITE_URL", raising=False)
    with ExitStack() as stack:
        servers = StoreServers(stack)
        url = servers.url("sqlite")
        assert servers.url("SQLITE") == url
        assert servers.store_url("sqlite") == url
        folder = Path(urlsplit(url).path).parent
        assert folder.is_dir()
    assert not folder.exists()


def test_a_server_that_does_not_answer_skips_with_the_backends_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Redis backend's reason, word for word; asked again, the same skip."""
    monkeypatch.setenv("MCP_TASKS_TEST_REDIS_URL", REFUSED_REDIS)
    monkeypatch.delenv("CI", raising=False)
    with ExitStack() as stack:
        servers = StoreServers(stack)
        for _ in range(2):
            with pytest.raises(pytest.skip.Exception) as skipped:
                servers.url("redis")
            message = str(skipped.value)
            assert message.startswith(
                "No Redis server for the tests: MCP_TASKS_TEST_REDIS_URL does not answer ("
            ), message


def test_in_ci_no_server_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TASKS_TEST_REDIS_URL", REFUSED_REDIS)
    monkeypatch.setenv("CI", "true")
    with ExitStack() as stack, pytest.raises(pytest.fail.Exception) as failed:
        StoreServers(stack).url("rediss")
    assert str(failed.value).endswith("(CI is set, so this fails instead of skipping)")


def test_unavailable_says_which_server_and_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"^No MySQL server for the tests: set X$"):
        unavailable("MySQL", "set X")


def test_a_server_a_test_starts_itself_skips_when_it_cannot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``provided`` turns a NoTestServer on entering into the skip; a server that starts is
    entered and left."""
    monkeypatch.delenv("CI", raising=False)
    events: list[str] = []

    @contextmanager
    def own(ok: bool) -> Iterator[str]:
        if not ok:
            raise NoTestServer("own Kind", "install kind")
        events.append("started")
        yield "kind://own"
        events.append("stopped")

    with provided(own(True)) as url:
        assert url == "kind://own"
    assert events == ["started", "stopped"]
    with (
        pytest.raises(pytest.skip.Exception, match=r"^No own Kind server for the tests: install"),
        provided(own(False)),
    ):
        pass
