"""The row cap under races and behind the store's back: many creates at the cap never pass
it, and expired documents deleted by another hand than the store's make room exactly once
each; the create lock a dead create left frees itself."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio
import pytest
from pymongo import AsyncMongoClient

from mcp_tasks import NewTask, StoreOptions, TaskLimitReached, new_task_id
from mcp_tasks_mongodb import create_lock

if TYPE_CHECKING:
    from conftest import OpenStore

    from mcp_tasks_mongodb import MongoTaskStore

pytestmark = pytest.mark.anyio

CAP = 6


async def _create_all(stores: list[MongoTaskStore], tasks: list[NewTask]) -> tuple[int, int]:
    """Create every task at once, spread over the handles: (created, refused)."""
    created = refused = 0

    async def create(store: MongoTaskStore, task: NewTask) -> None:
        nonlocal created, refused
        try:
            await store.create(task)
            created += 1
        except TaskLimitReached:
            refused += 1

    async with anyio.create_task_group() as group:
        for i, task in enumerate(tasks):
            group.start_soon(create, stores[i % len(stores)], task)
    return created, refused


async def _stored(mongodb_url: str, store: MongoTaskStore) -> int:
    client: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(mongodb_url)
    try:
        return await client[store.database][f"{store.prefix}_tasks"].count_documents({})
    finally:
        await client.close()


async def test_concurrent_creates_at_the_cap_never_pass_it(
    open_store: OpenStore, mongodb_url: str
) -> None:
    """30 creates from 6 handles against max_rows=6, with one owner's cap of 4 beside it:
    exactly 6 stored rows, the rest refused; then again on a full namespace, all refused."""
    options = StoreOptions(max_rows=CAP)
    stores = [await open_store(options) for _ in range(6)]
    created, refused = await _create_all(stores, [NewTask(new_task_id()) for _ in range(30)])
    assert (created, refused) == (CAP, 30 - CAP)
    assert await _stored(mongodb_url, stores[0]) == CAP
    created, refused = await _create_all(stores, [NewTask(new_task_id()) for _ in range(8)])
    assert (created, refused) == (0, 8)
    assert await _stored(mongodb_url, stores[0]) == CAP


async def test_concurrent_creates_at_the_owner_cap_never_pass_it(
    open_store: OpenStore, mongodb_url: str
) -> None:
    """20 creates of one owner from 5 handles against max_active_per_owner=3: exactly 3."""
    options = StoreOptions(max_active_per_owner=3)
    stores = [await open_store(options) for _ in range(5)]
    tasks = [NewTask(new_task_id(), owner="alice") for _ in range(20)]
    assert await _create_all(stores, tasks) == (3, 17)
    assert await _stored(mongodb_url, stores[0]) == 3


async def test_deletions_behind_the_stores_back_keep_the_cap_exact(
    open_store: OpenStore, mongodb_url: str
) -> None:
    """Fill the cap with short-lived tasks, let another hand delete them once expired (a
    TTL monitor on a server without transactions, an operator: no reap), then race to fill
    it again: exactly the cap, as if the namespace were new."""
    options = StoreOptions(max_rows=CAP)
    stores = [await open_store(options) for _ in range(4)]
    # Long enough that none expires before the cap is shown full, even on a busy machine
    # (at 500 ms the first could expire while the last were still being created).
    first = [NewTask(new_task_id(), ttl_ms=5_000) for _ in range(CAP)]
    assert await _create_all(stores, first) == (CAP, 0)
    with pytest.raises(TaskLimitReached):
        await stores[0].create(NewTask(new_task_id()))
    await anyio.sleep(5.5)  # every one of them past its TTL
    client: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(mongodb_url)
    try:
        tasks = client[stores[0].database][f"{stores[0].prefix}_tasks"]
        await tasks.delete_many({"expires_at": {"$lte": int(time.time() * 1000)}})
    finally:
        await client.close()
    assert not await _stored(mongodb_url, stores[0])
    created, refused = await _create_all(stores, [NewTask(new_task_id()) for _ in range(24)])
    assert (created, refused) == (CAP, 24 - CAP)
    assert await _stored(mongodb_url, stores[0]) == CAP


async def test_a_create_lock_left_by_a_dead_create_frees_after_half_its_bound(
    open_store: OpenStore, mongodb_url: str
) -> None:
    """A create that took the namespace's create lock at the start of its bound and died
    there (its process killed: no unlock) holds it for half of that bound; a create
    retried at once elsewhere, with the same bound, gets the lock then and creates its task
    with the other half (a lock held for the dead create's whole bound would leave it only
    the few milliseconds between the two starts)."""
    bound_s = 3.0
    store = await open_store(StoreOptions(max_rows=CAP, timeout_ms=int(bound_s * 1000)))
    await store.create(NewTask(new_task_id()))  # the lock document exists
    dead = await create_lock.take(store._meta(), deadline=time.monotonic() + bound_s)
    assert dead.ends <= time.monotonic() + bound_s / 2  # never unlocked
    created = await store.create(NewTask(new_task_id()))
    assert time.monotonic() >= dead.ends  # it waited for the lock, not past it
    assert await _stored(mongodb_url, store) == 2
    assert (await store.get(created.task_id, None)).task_id == created.task_id
