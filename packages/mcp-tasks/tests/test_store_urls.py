"""store_from_url: stores by URL scheme, and the exact install line for a missing extra."""

from __future__ import annotations

import pytest

from mcp_tasks import MemoryTaskStore, StoreOptions, UnknownStoreScheme, store_from_url
from mcp_tasks.stores import opening


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_memory_url_gives_a_memory_store_with_the_options() -> None:
    """memory:// is registered by the core distribution itself and takes StoreOptions."""
    options = StoreOptions(max_rows=7)
    store = store_from_url("memory://", options)
    assert isinstance(store, MemoryTaskStore)
    assert store.options == options
    await store.close()


def test_scheme_is_case_insensitive() -> None:
    """MEMORY:// finds the same store as memory://."""
    assert isinstance(store_from_url("MEMORY://"), MemoryTaskStore)


def test_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no URL given, MCP_TASKS_STORE_URL is used."""
    monkeypatch.setenv("MCP_TASKS_STORE_URL", "memory://")
    assert isinstance(store_from_url(), MemoryTaskStore)


def test_no_url_anywhere_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """No URL and no MCP_TASKS_STORE_URL: the message says how to give one."""
    monkeypatch.delenv("MCP_TASKS_STORE_URL", raising=False)
    with pytest.raises(UnknownStoreScheme, match="MCP_TASKS_STORE_URL"):
        store_from_url()


def test_url_without_scheme_is_refused() -> None:
    """A bare path is not a store URL."""
    with pytest.raises(UnknownStoreScheme, match="needs a scheme"):
        store_from_url("tasks.db")


def test_unknown_scheme_points_to_the_entry_point_group() -> None:
    """A scheme nobody registers is refused, naming the group a third-party store uses; it is
    also a ValueError."""
    with pytest.raises(UnknownStoreScheme) as caught:
        store_from_url("nosuchstore://host/db")
    assert "nosuchstore://" in str(caught.value)
    assert "'mcp_tasks.stores'" in str(caught.value)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("url", "extra"),
    [
        ("sqlite:///tasks.db", "sqlite"),
        ("postgresql://postgres@127.0.0.1/test", "postgres"),
        ("postgres://postgres@127.0.0.1/test", "postgres"),
    ],
)
def test_known_but_missing_store_names_the_exact_install_line(
    monkeypatch: pytest.MonkeyPatch, url: str, extra: str
) -> None:
    """An in-repo backend that is not installed fails with the exact pip install line.

    The entry points are emptied so the message is checked whichever siblings this
    environment happens to have installed.
    """
    monkeypatch.setattr(opening, "entry_points", lambda **_: [])
    with pytest.raises(UnknownStoreScheme) as caught:
        store_from_url(url)
    assert str(caught.value).endswith(f'pip install "mcp-tasks[{extra}]"')
    assert url.split("://", 1)[1] not in str(caught.value)


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6379/0", "mongodb://127.0.0.1:27017/db"])
def test_no_install_line_names_an_extra_that_does_not_exist(url: str) -> None:
    """Only extras that exist are named: schemes of stores not built yet get the generic
    answer, with no pip install line."""
    with pytest.raises(UnknownStoreScheme) as caught:
        store_from_url(url)
    assert "pip install" not in str(caught.value)
