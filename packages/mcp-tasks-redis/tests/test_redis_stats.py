"""The Redis store's ``stats()`` counts from the sets its writes keep, reading only the tasks
whose figure moves with the clock alone; held here to the walk of every task
(``mcp_tasks.stores.stats.tally``, what it answers for a namespace not filed yet) on a
population in every state, tasks past their TTL and tasks older than the unclaimed
threshold included."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import anyio
import pytest
from redis.asyncio import Redis

from mcp_tasks import (
    Complete,
    NewTask,
    RequireInput,
    Retry,
    StoreOptions,
    WorkSpec,
    new_task_id,
)
from mcp_tasks.domain.rules import UNCLAIMED_AFTER_MS
from mcp_tasks_redis.store import FILED

if TYPE_CHECKING:
    from conftest import OpenStore

    from mcp_tasks import TaskRecord
    from mcp_tasks_redis import RedisTaskStore

pytestmark = pytest.mark.anyio

SHORT_MS = 300
#: A lease that must outlive the write after its claim, and end before the count.
LEASE_MS = 1_000
HOUR_MS = 3_600_000
ASK = {"method": "elicitation/create", "params": {"message": "Go?"}}
BOOM = {"code": -32603, "message": "boom"}


def work(*delays_ms: int, kind: str = "job") -> WorkSpec:
    return WorkSpec(kind, {}, retry_delays_ms=delays_ms)


async def populate(store: RedisTaskStore) -> list[TaskRecord]:
    """Tasks of five owners and none, in every state ``stats`` tells apart; some expire,
    and a sixth owner's only active task."""
    made: list[TaskRecord] = []

    async def task(owner: str | None, ttl_ms: int | None = HOUR_MS, **kw: object) -> TaskRecord:
        record = await store.create(NewTask(new_task_id(), owner=owner, ttl_ms=ttl_ms, **kw))  # type: ignore[arg-type]
        made.append(record)
        return record

    for i in range(40):
        owner = f"owner-{i % 5}" if i % 7 else None
        ttl = SHORT_MS if i % 6 == 0 else HOUR_MS  # a sixth expire, not reaped
        kind = i % 8
        if kind == 0:  # manual, working
            await task(owner, ttl)
        elif kind == 1:  # queued work, of two types
            await task(owner, ttl, work=work(kind="a" if i % 2 else "b"))
        elif kind == 2:  # a live lease
            record = await task(owner, ttl, work=work())
            await store.claim("w", lease_ms=HOUR_MS, task_id=record.task_id)
        elif kind == 3:  # a lease that lapses
            record = await task(owner, ttl, work=work())
            await store.claim("w", lease_ms=SHORT_MS, task_id=record.task_id)
        elif kind == 4:  # a retry due soon, or pending for long
            record = await task(owner, ttl, work=work(SHORT_MS if i % 3 else HOUR_MS))
            claimed = await store.claim("w", lease_ms=HOUR_MS, task_id=record.task_id)
            assert claimed is not None
            await store.put_status(record.task_id, Retry(BOOM), lease=claimed.lease)
        elif kind == 5:
            record = await task(owner, ttl)
            await store.put_status(record.task_id, RequireInput({"k": ASK}))
        elif kind == 6:
            record = await task(owner, ttl)
            await store.put_status(record.task_id, Complete({"content": []}))
        else:  # without TTL
            await task(owner, None, work=work(kind="a"))
    record = await task("owner-1", SHORT_MS, work=work(HOUR_MS))  # expires, retry pending
    claimed = await store.claim("w", lease_ms=LEASE_MS, task_id=record.task_id)
    assert claimed is not None
    await store.put_status(record.task_id, Retry(BOOM), lease=claimed.lease)
    await task("owner-gone", SHORT_MS, work=work())  # its only active task expires
    await task("owner-gone", None)
    await store.put_status(made[-1].task_id, Complete({"content": []}))
    return made


async def backdate(client: Redis, tag: str, records: list[TaskRecord]) -> None:
    """Two tasks in three created a minute earlier (past the unclaimed threshold), in
    their hash and in every set ordered by ``created_at``: tasks that waited that long."""
    ready = [f"{tag}:ready", f"{tag}:ready:a", f"{tag}:ready:b", f"{tag}:ready:job"]
    for record in [r for n, r in enumerate(records) if n % 3]:
        earlier = record.created_at - 2 * UNCLAIMED_AFTER_MS
        await client.hset(f"{tag}:t:{record.task_id}", "c", str(earlier))
        for key in (*ready, f"{tag}:rows:working-since"):
            if await client.zscore(key, record.task_id) is not None:
                await client.zadd(key, {record.task_id: earlier})


async def test_stats_from_the_sets_equal_the_walk_of_every_task(
    open_store: OpenStore, redis_url: str, namespace: str
) -> None:
    """Counted from the sets or by walking every task, ``stats()`` gives the same figures:
    claims live and lapsed (one moved to a ready lane by a claim), retries due and pending,
    tasks waiting unclaimed, the oldest working task, tasks expiring within the hour, and
    the owners and their largest counts, with a sixth of the tasks past their TTL."""
    store = await open_store(StoreOptions(max_rows=None, max_active_per_owner=None))
    records = await populate(store)
    client = Redis.from_url(redis_url)
    tag = "{" + namespace + "}"
    try:
        await backdate(client, tag, records)
        await anyio.sleep(1.5 * LEASE_MS / 1000)
        # a claim of a type nobody has moves the due delayed tasks to their ready lanes
        assert await store.claim("w", lease_ms=HOUR_MS, work_types=frozenset({"none"})) is None
        counted = await store.stats()
        await client.delete(f"{tag}:rows:counted")
        walked = await store.stats()
        await client.set(f"{tag}:rows:counted", FILED)
    finally:
        await client.aclose()
    assert walked.now - counted.now < UNCLAIMED_AFTER_MS // 10  # far from every edge
    assert replace(counted, now=0) == replace(walked, now=0)
    assert counted.expired > 0
    assert counted.lease_lapsed > 0
    assert counted.retry_due > 0
    assert counted.retry_pending > 0
    assert counted.waiting_unclaimed > 0
    assert counted.owners == 5
