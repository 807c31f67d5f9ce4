"""Opening the Redis store: its URLs and prefixes, a repr without the password, a server
that is not there, a namespace that is dropped whole and only it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest
from redis.asyncio import Redis

from mcp_tasks import (
    NewTask,
    StoreUnavailable,
    TaskNotFound,
    drop_namespace,
    namespaced_url,
    new_task_id,
    store_from_url,
)
from mcp_tasks.stores.opening import InvalidStoreURL
from mcp_tasks_contract import new_namespace
from mcp_tasks_redis import RedisTaskStore

if TYPE_CHECKING:
    from conftest import OpenStore

pytestmark = pytest.mark.anyio


async def test_store_from_url_finds_the_redis_store(redis_url: str, namespace: str) -> None:
    """redis:// resolves through the entry points; ?prefix= is the namespace."""
    url = namespaced_url(redis_url, namespace)
    store = store_from_url(url)
    assert isinstance(store, RedisTaskStore)
    assert store.prefix == namespace
    assert store.url == url
    try:
        task = await store.create(NewTask(new_task_id()))
        assert (await store.get(task.task_id, None)).task_id == task.task_id
    finally:
        await store.close()
    await drop_namespace(url)


def test_the_default_prefix_and_bad_urls() -> None:
    """Without ?prefix= the namespace is mcp_tasks; a prefix that is not a plain name, and a
    URL of another scheme, are refused with the expected form."""
    store = store_from_url("redis://127.0.0.1:6379/0")
    assert isinstance(store, RedisTaskStore)
    assert store.prefix == "mcp_tasks"
    with pytest.raises(InvalidStoreURL, match="prefix"):
        store_from_url("redis://127.0.0.1:6379/0?prefix=a}b")
    with pytest.raises(ValueError, match="redis://"):
        RedisTaskStore("postgresql://u@h/db")


def test_a_cluster_url_opens_a_cluster_store_and_names_it_again() -> None:
    """``?cluster=1`` reaches a cluster: the store's url keeps it (so namespaced and
    reopened URLs stay cluster URLs) and masks the password; a unix socket cannot be a
    cluster's, and ?cluster= takes 1 or 0 only."""
    store = store_from_url("redis://bob:pw@node1:7000/0?cluster=1&prefix=team")
    assert isinstance(store, RedisTaskStore)
    assert store.cluster
    assert store.prefix == "team"
    assert "pw" not in store.url
    again = store_from_url(store.url.replace("***", "pw"))
    assert isinstance(again, RedisTaskStore)
    assert (again.cluster, again.prefix) == (True, "team")
    assert not store_from_url("redis://node1:7000/0?cluster=0").cluster  # type: ignore[attr-defined]
    with pytest.raises(InvalidStoreURL, match="cluster"):
        store_from_url("redis://node1:7000/0?cluster=maybe")
    with pytest.raises(ValueError, match="TCP"):
        RedisTaskStore("redis+unix:///tmp/redis.sock", cluster=True)


def test_repr_masks_the_password() -> None:
    """repr(store) and its url never show the password of its URL."""
    store = store_from_url("redis://alice:s3cret@cache.example:6379/0?prefix=mcp_x")
    assert "s3cret" not in repr(store)
    assert "alice:***@cache.example" in repr(store)
    assert isinstance(store, RedisTaskStore)
    assert "s3cret" not in store.url


async def test_unreachable_server_is_store_unavailable() -> None:
    """A server that does not answer surfaces as StoreUnavailable with the driver error as cause."""
    with anyio.fail_after(30):
        store = RedisTaskStore("redis://127.0.0.1:1/0")  # nothing listens on port 1
        with pytest.raises(StoreUnavailable) as caught:
            await store.get(new_task_id(), None)
        assert caught.value.__cause__ is not None
        await store.close()


async def test_every_key_shares_the_namespace_hash_tag(
    open_store: OpenStore, redis_url: str, namespace: str
) -> None:
    """Every key a store writes starts with {prefix}: (one cluster slot per namespace)."""
    store = await open_store()
    await store.create(NewTask(new_task_id(), owner="alice"))
    client = Redis.from_url(redis_url)
    try:
        keys = [key.decode() async for key in client.scan_iter(match=f"*{namespace}*")]
    finally:
        await client.aclose()
    assert keys
    assert all(key.startswith("{" + namespace + "}:") for key in keys), keys


async def test_drop_removes_one_namespace_only(open_store: OpenStore, redis_url: str) -> None:
    """drop_namespace deletes its own namespace's tasks, never another's (even one whose
    name starts the same)."""
    store = await open_store()
    mine = await store.create(NewTask(new_task_id()))
    other_ns = store.prefix + "_x"
    other = RedisTaskStore(redis_url, prefix=other_ns)
    try:
        theirs = await other.create(NewTask(new_task_id()))
        await drop_namespace(namespaced_url(redis_url, store.prefix))
        with pytest.raises(TaskNotFound):
            await store.get(mine.task_id, None)
        assert (await other.get(theirs.task_id, None)) == theirs
    finally:
        await other.close()
        await drop_namespace(namespaced_url(redis_url, other_ns))
    await drop_namespace(namespaced_url(redis_url, new_namespace()))  # missing: fine


async def test_more_operations_than_connections_wait_for_one(open_store: OpenStore) -> None:
    """With a pool of 2 connections, 40 creates and gets at once all succeed: an operation
    that finds every connection busy waits for one (within the store's bound) instead of
    failing as redis-py's default pool does past its size."""
    store = await open_store(max_connections=2)
    ids = [new_task_id() for _ in range(40)]
    async with anyio.create_task_group() as group:
        for task_id in ids:
            group.start_soon(store.create, NewTask(task_id))
    seen: list[str] = []

    async def read(task_id: str) -> None:
        seen.append((await store.get(task_id, None)).task_id)

    async with anyio.create_task_group() as group:
        for task_id in ids:
            group.start_soon(read, task_id)
    assert sorted(seen) == sorted(ids)
