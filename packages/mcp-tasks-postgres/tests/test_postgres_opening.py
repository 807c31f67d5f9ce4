"""Opening the Postgres store: its URLs, a repr without the password, a server that is not
there."""

from __future__ import annotations

import anyio
import pytest

from mcp_tasks import (
    NewTask,
    StoreUnavailable,
    drop_namespace,
    namespaced_url,
    new_task_id,
    store_from_url,
)
from mcp_tasks_postgres import PostgresTaskStore

pytestmark = pytest.mark.anyio


async def test_store_from_url_finds_the_postgres_store(postgres_url: str, namespace: str) -> None:
    """postgresql:// and postgres:// resolve through the entry points; ?schema= is the namespace."""
    sep = "&" if "?" in postgres_url else "?"
    for url in (postgres_url, postgres_url.replace("postgresql://", "postgres://", 1)):
        store = store_from_url(f"{url}{sep}schema={namespace}")
        assert isinstance(store, PostgresTaskStore)
        assert store.schema == namespace
        try:
            task = await store.create(NewTask(new_task_id()))
            assert (await store.get(task.task_id, None)).task_id == task.task_id
        finally:
            await store.close()
    await drop_namespace(namespaced_url(postgres_url, namespace))


def test_repr_masks_the_password() -> None:
    """repr(store) never shows the password of its URL."""
    store = PostgresTaskStore("postgresql://alice:s3cret@db.example/tasks", schema="mcp_x")
    assert "s3cret" not in repr(store)
    assert "alice:***@db.example" in repr(store)


async def test_unreachable_server_is_store_unavailable() -> None:
    """A server that does not answer surfaces as StoreUnavailable with the driver error as cause."""
    with anyio.fail_after(30):
        sock_port = 1  # nothing listens on port 1
        store = PostgresTaskStore(f"postgresql://postgres@127.0.0.1:{sock_port}/test")
        with pytest.raises(StoreUnavailable) as caught:
            await store.get(new_task_id(), None)
        assert caught.value.__cause__ is not None
        await store.close()
