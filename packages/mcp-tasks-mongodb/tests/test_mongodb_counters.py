"""The counters of the MongoDB store (:mod:`mcp_tasks_mongodb.counters`): ``stats()`` read
from them agrees with ``tally`` of the stored records whether the writes are folded or
not, and a collection from before them has them made by ``migrate``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest
from pymongo import AsyncMongoClient

from mcp_tasks import (
    ANY_OWNER,
    Complete,
    Fail,
    NewTask,
    RequireInput,
    Retry,
    StoreOptions,
    new_task_id,
)
from mcp_tasks.stores.stats import count, tally
from mcp_tasks_contract.store_servers import unavailable
from mcp_tasks_contract.suite.base import BOOM, ELICIT, LONG_LEASE_MS, job
from mcp_tasks_mongodb import MongoTaskStore, counters
from mcp_tasks_mongodb.codec import record_of
from mcp_tasks_mongodb.provision import own_mongodb

if TYPE_CHECKING:
    from conftest import OpenStore

pytestmark = pytest.mark.anyio

OPTIONS = StoreOptions(max_rows=None, max_active_per_owner=None)
HOUR_MS = 3_600_000


async def _records(mongodb_url: str, store: MongoTaskStore) -> list[object]:
    client: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(mongodb_url)
    try:
        found = client[store.database][f"{store.prefix}_tasks"].find({})
        return [record_of(document) async for document in found]
    finally:
        await client.close()


async def _populate(store: MongoTaskStore) -> None:
    """Tasks in most states stats tells apart, over three owners and none."""
    owners = ["alice", "bob", "carol", None]
    for i in range(12):
        owner = owners[i % 4]
        ttl = None if i % 5 == 0 else (HOUR_MS // 2 if i % 3 == 0 else 2 * HOUR_MS)
        work = job() if i % 2 else None
        task = await store.create(NewTask(new_task_id(), owner=owner, ttl_ms=ttl, work=work))
        match i % 6:
            case 0:
                await store.put_status(task.task_id, Complete({"content": []}))
            case 1:
                await store.claim("worker", lease_ms=LONG_LEASE_MS, task_id=task.task_id)
            case 2:
                await store.put_status(task.task_id, RequireInput({"a": ELICIT}))
            case 3:
                claimed = await store.claim("worker", lease_ms=LONG_LEASE_MS, task_id=task.task_id)
                assert claimed is not None
                await store.put_status(task.task_id, Retry(BOOM), lease=claimed.lease)
            case 4:
                await store.cancel(task.task_id, ANY_OWNER)
            case _:
                await store.put_status(task.task_id, Fail(BOOM))


async def _agree(mongodb_url: str, store: MongoTaskStore) -> None:
    stats, counts = await store.stats(), await store.counts()
    records = await _records(mongodb_url, store)
    assert stats == tally(records, stats.now, OPTIONS)  # type: ignore[arg-type]
    assert counts == count(records, counts.now, OPTIONS)  # type: ignore[arg-type]


async def test_stats_from_the_counters_agree_with_tally_folded_or_not(
    open_store: OpenStore, mongodb_url: str
) -> None:
    """With every write still dirty, after a fold (a reap) and after more writes on top of
    the fold, ``stats()`` and ``counts()`` are ``tally`` and ``count`` of the records."""
    store = await open_store(OPTIONS)
    await _populate(store)
    await _agree(mongodb_url, store)
    await store.reap()
    await _agree(mongodb_url, store)
    await _populate(store)
    await _agree(mongodb_url, store)
    await store.reap()
    await _agree(mongodb_url, store)


async def test_the_oldest_working_task_is_found_past_expired_ones_and_empty_seconds(
    open_store: OpenStore, mongodb_url: str
) -> None:
    """Working tasks spread over one minute, the earliest past their TTL and not reaped:
    ``stats()`` names the oldest unexpired one, with every write dirty, once folded, and
    when one more expires by its TTL alone after the fold (no write marks it)."""
    store = await open_store(OPTIONS)
    ids = [(await store.create(NewTask(new_task_id(), ttl_ms=HOUR_MS))).task_id for _ in range(6)]
    now = await store._server_now()
    minute = (now // 60_000 - 2) * 60_000
    offsets = [1_500, 1_700, 23_400, 23_900, 47_000, 59_999]
    client: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(mongodb_url)
    tasks = client[store.database][f"{store.prefix}_tasks"]
    try:
        for i, (task_id, offset) in enumerate(zip(ids, offsets, strict=True)):
            expires_at = now - 1_000 if i < 2 else now + HOUR_MS
            await tasks.update_one(
                {"_id": task_id},
                {"$set": {"created_at": minute + offset, "expires_at": expires_at}},
            )
        await _agree(mongodb_url, store)
        assert (await store.stats()).oldest_working_created_at == minute + 23_400
        await counters.fold(
            store._db(), store._tasks_name, store._counts_name, now, anyio.current_time() + 30
        )
        assert await tasks.count_documents({"dirty": True}) == 2  # the expired stay dirty
        await _agree(mongodb_url, store)
        await tasks.update_one({"_id": ids[2]}, {"$set": {"expires_at": now - 1_000}})
        await _agree(mongodb_url, store)
        assert (await store.stats()).oldest_working_created_at == minute + 23_900
    finally:
        await client.close()


async def test_migrate_makes_the_counters_of_a_collection_from_before_them(
    open_store: OpenStore, mongodb_url: str
) -> None:
    """A collection written before the counters (no counter collection, no document marked)
    is counted exactly once ``migrate`` has made them, folded or not."""
    store = await open_store(OPTIONS)
    await _populate(store)
    await store.reap()
    client: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(mongodb_url)
    try:
        db = client[store.database]
        await db.drop_collection(f"{store.prefix}_counts")
        await db[f"{store.prefix}_tasks"].update_many({}, {"$unset": {"dirty": "", "f": ""}})
    finally:
        await client.close()
    fresh = await open_store(OPTIONS)
    assert await fresh.migrate() is True
    await _agree(mongodb_url, fresh)
    await fresh.reap()
    await _agree(mongodb_url, fresh)


async def test_a_standalone_server_counts_by_aggregation_and_keeps_the_janitor() -> None:
    """A server without transactions has no counters: ``stats()`` and ``counts()`` agree
    with ``tally`` and ``count`` by aggregating the collection, ``reap`` deletes, and the
    janitor (the TTL index on ``gone_at``) is there."""
    with own_mongodb(standalone=True) as server:
        if server is None:
            unavailable("own MongoDB", "install the SecantusDB test dependency")
        store = MongoTaskStore(server.url, OPTIONS, prefix="standalone")
        try:
            await _populate(store)
            await _agree(server.url, store)
            await store.create(NewTask(new_task_id(), ttl_ms=1))
            await anyio.sleep(0.05)
            assert await store.reap() == 1
            await _agree(server.url, store)
            client: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(server.url)
            try:
                db = client[store.database]
                indexes = await db["standalone_tasks"].index_information()
                kept = await db.list_collection_names()
            finally:
                await client.close()
        finally:
            await store.close()
    assert indexes["janitor"]["expireAfterSeconds"] == 0
    assert "standalone_counts" not in kept
