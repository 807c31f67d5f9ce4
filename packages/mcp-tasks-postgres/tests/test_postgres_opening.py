"""Opening the Postgres store: its URLs, a repr without the password, a server that is not
there."""

from __future__ import annotations

import anyio
import asyncpg
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


async def _connections_named(postgres_url: str, name: str) -> int:
    """How many connections to the test database call themselves ``name`` now."""
    conn = await asyncpg.connect(postgres_url)
    try:
        count = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE application_name = $1 AND datname = current_database()",
            name,
        )
        return int(count)
    finally:
        await conn.close()


async def test_the_url_sizes_the_connection_pool(postgres_url: str, namespace: str) -> None:
    """?max_connections= caps the pool, ?min_connections= opens that many at once; neither
    reaches the server as a setting (asyncpg sends unknown URL parameters as settings). The
    connections are counted by an ?application_name= of this test's own, so other clients of
    the database (other tests, other runs) do not count."""
    sep = "&" if "?" in postgres_url else "?"
    url = f"{postgres_url}{sep}schema={namespace}&application_name={namespace}"
    capped = store_from_url(f"{url}&max_connections=1")
    try:
        task = await capped.create(NewTask(new_task_id()))
        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(capped.get, task.task_id, None)
        assert await _connections_named(postgres_url, namespace) == 1
    finally:
        await capped.close()
    wide = store_from_url(f"{url}&min_connections=3&max_connections=5")
    try:
        assert (await wide.get(task.task_id, None)).task_id == task.task_id
        assert await _connections_named(postgres_url, namespace) == 3
        assert isinstance(wide, PostgresTaskStore)
        assert "connections" not in wide.url
    finally:
        await wide.close()
    assert await _connections_named(postgres_url, namespace) == 0


async def test_connections_name_themselves_mcp_tasks_unless_the_url_names_them(
    postgres_url: str, namespace: str
) -> None:
    """Operators tell applications apart in pg_stat_activity: the store's connections say
    ``mcp-tasks`` by default, and the URL's ?application_name= wins when it is given."""
    sep = "&" if "?" in postgres_url else "?"
    named = f"{namespace}_app"
    store = store_from_url(f"{postgres_url}{sep}schema={namespace}&application_name={named}")
    try:
        await store.create(NewTask(new_task_id()))
        assert await _connections_named(postgres_url, named) == 1
    finally:
        await store.close()
    store = store_from_url(f"{postgres_url}{sep}schema={namespace}")
    conn = await asyncpg.connect(postgres_url)
    try:
        await store.create(NewTask(new_task_id()))
        # the connection's last statement names this test's schema
        names = await conn.fetch(
            "SELECT application_name FROM pg_stat_activity"
            " WHERE datname = current_database() AND strpos(query, $1) > 0"
            " AND pid <> pg_backend_pid()",
            namespace,
        )
        assert [row["application_name"] for row in names] == ["mcp-tasks"]
    finally:
        await conn.close()
        await store.close()
    await drop_namespace(namespaced_url(postgres_url, namespace))
