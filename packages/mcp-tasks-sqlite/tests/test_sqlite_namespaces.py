"""Namespaces in one SQLite file: a table prefix per namespace, named in the URL, droppable."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

from mcp_tasks import (
    ANY_OWNER,
    NewTask,
    TaskNotFound,
    drop_namespace,
    namespaced_url,
    new_task_id,
    store_from_url,
)
from mcp_tasks_sqlite import SQLiteTaskStore

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio


def _tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {name for (name,) in rows}


async def test_namespaces_share_a_file_and_drop_alone(tmp_path: Path) -> None:
    """Two prefixes in one file keep separate tasks; dropping one removes its tables and
    tasks only; the store's URL opens the same namespace again."""
    base = f"sqlite:///{tmp_path / 'shared.db'}"
    url_a, url_b = namespaced_url(base, "alpha"), namespaced_url(base, "beta")
    store_a, store_b = store_from_url(url_a), store_from_url(url_b)
    assert isinstance(store_a, SQLiteTaskStore)
    task = await store_a.create(NewTask(task_id=new_task_id()))
    await store_b.create(NewTask(task_id=new_task_id()))
    with pytest.raises(TaskNotFound):
        await store_b.get(task.task_id, ANY_OWNER)
    again = store_from_url(store_a.url)
    assert await again.get(task.task_id, ANY_OWNER) == task
    for store in (store_a, store_b, again):
        await store.close()

    assert {"alpha_tasks", "alpha_task_rows", "beta_tasks"} <= _tables(tmp_path / "shared.db")
    await drop_namespace(url_a)
    remaining = _tables(tmp_path / "shared.db")
    assert not {t for t in remaining if t.startswith("alpha_")}
    assert {"beta_tasks", "beta_task_rows"} <= remaining
    fresh = store_from_url(url_a)
    with pytest.raises(TaskNotFound):
        await fresh.get(task.task_id, ANY_OWNER)
    await fresh.close()


async def test_dropping_a_namespace_of_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    await drop_namespace(f"sqlite:///{tmp_path / 'absent.db'}?table_prefix=x_")
    assert not (tmp_path / "absent.db").exists()
