"""Opening the SQLite store: its URL, a real file only, its repr, a file it cannot open."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks import NewTask, StoreUnavailable, new_task_id, store_from_url
from mcp_tasks_sqlite import SQLiteTaskStore

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio


async def test_store_from_url_opens_a_file(tmp_path: Path) -> None:
    """sqlite:////absolute/path resolves through the entry point to that file."""
    path = tmp_path / "via-url.db"
    store = store_from_url(f"sqlite:///{path}")
    assert isinstance(store, SQLiteTaskStore)
    assert store.path == path
    try:
        await store.create(NewTask(new_task_id()))
    finally:
        await store.close()
    assert path.exists()


def test_memory_databases_are_refused() -> None:
    """A store needs a real file: ':memory:' is not shared between connections."""
    with pytest.raises(ValueError, match="memory://"):
        SQLiteTaskStore(":memory:")


def test_repr_names_the_file(tmp_path: Path) -> None:
    """repr(store) says which file it uses."""
    assert "tasks.db" in repr(SQLiteTaskStore(tmp_path / "tasks.db"))


async def test_unopenable_file_is_store_unavailable(tmp_path: Path) -> None:
    """A file that cannot be opened surfaces as StoreUnavailable with the driver error as cause."""
    store = SQLiteTaskStore(tmp_path / "missing-dir" / "tasks.db")
    with pytest.raises(StoreUnavailable) as caught:
        await store.get(new_task_id(), None)
    assert caught.value.__cause__ is not None
    await store.close()


async def test_a_relative_path_is_resolved_when_the_store_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sqlite:///my-tasks.db names my-tasks.db in the directory the store was opened in:
    the URL it gives is absolute, and a later `cd` does not move the database."""
    opened_in = tmp_path / "project"
    opened_in.mkdir()
    monkeypatch.chdir(opened_in)
    store = store_from_url("sqlite:///my-tasks.db")
    assert isinstance(store, SQLiteTaskStore)
    assert store.url == f"sqlite:///{opened_in.resolve()}/my-tasks.db"
    monkeypatch.chdir(tmp_path)
    try:
        await store.create(NewTask(new_task_id()))
    finally:
        await store.close()
    assert (opened_in / "my-tasks.db").exists()
    assert not (tmp_path / "my-tasks.db").exists()
