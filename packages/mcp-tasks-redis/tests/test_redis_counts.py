"""The Redis store's counts (``counts()``): a sorted set per status that every script keeps
beside the task, and ``migrate`` filing the tasks of a namespace written before them."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import anyio
import pytest
from redis.asyncio import Redis

from mcp_tasks import ANY_OWNER, Complete, NewTask, StoreOptions, TaskStatus, new_task_id
from mcp_tasks_redis.store import FILED

#: The sets ``stats()`` counts from, beside the status sets.
STATS_SETS = ("leases", "retries", "working-since", "owners", "owner-expiry")

if TYPE_CHECKING:
    from conftest import OpenStore

pytestmark = pytest.mark.anyio


async def test_migrate_files_the_tasks_of_a_namespace_written_before_the_counts(
    open_store: OpenStore, redis_url: str, namespace: str
) -> None:
    """A namespace whose tasks were written before the sets existed: ``counts()`` and
    ``stats()`` walk the tasks meanwhile (exact, at a walk's cost); ``migrate`` files every
    task, writes made while it runs file their own, and from then on both read the sets,
    exact (the same figures as the walk); a second ``migrate`` has nothing to do."""
    store = await open_store(StoreOptions(max_rows=None))
    tasks = [await store.create(NewTask(new_task_id(), ttl_ms=3_600_000)) for _ in range(30)]
    for task in tasks[:10]:
        await store.put_status(task.task_id, Complete({"content": []}))
    client = Redis.from_url(redis_url)
    try:
        tag = "{" + namespace + "}"
        statuses = [f"{tag}:rows:{status.value}" for status in TaskStatus]
        kept = [f"{tag}:rows:{name}" for name in STATS_SETS]
        await client.delete(f"{tag}:rows:counted", *statuses, *kept)
        before = await store.counts()
        assert (before.rows, before.by_status[TaskStatus.COMPLETED]) == (30, 10)

        async with anyio.create_task_group() as group:
            group.start_soon(store.migrate)
            for task in tasks[10:15]:
                group.start_soon(store.cancel, task.task_id, ANY_OWNER)
        assert await client.get(f"{tag}:rows:counted") == FILED
        assert sum([await client.zcard(key) for key in statuses]) == 30
        assert await client.zcard(f"{tag}:rows:working-since") == 15
        counts, stats = await store.counts(), await store.stats()
        await client.delete(f"{tag}:rows:counted")
        walked = await store.stats()
        await client.set(f"{tag}:rows:counted", FILED)
    finally:
        await client.aclose()
    assert replace(stats, now=0) == replace(walked, now=0)
    assert (counts.rows, dict(counts.by_status)) == (stats.rows, dict(stats.by_status))
    assert (counts.by_status[TaskStatus.WORKING], counts.by_status[TaskStatus.CANCELLED]) == (15, 5)
    assert await store.migrate() is False
