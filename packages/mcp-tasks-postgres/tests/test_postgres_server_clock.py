"""The Postgres store keeps time by the database server's clock, not the client's."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import asyncpg
import pytest

from mcp_tasks import NewTask, Progress, StaleLease, WorkSpec, new_task_id

if TYPE_CHECKING:
    from conftest import OpenStore

pytestmark = pytest.mark.anyio

SERVER_NOW_MS = "SELECT floor(extract(epoch from clock_timestamp()) * 1000)::bigint"


async def wait_past(url: str, epoch_ms: int) -> None:
    """Wait until the server's clock (the store clock) is past ``epoch_ms``: expiry is then
    certain, however long the test's own steps took (10 s failure timeout)."""
    conn = await asyncpg.connect(url)
    try:
        with anyio.fail_after(10):
            while True:
                now = await conn.fetchval(SERVER_NOW_MS)
                if now > epoch_ms:
                    return
                await anyio.sleep((epoch_ms - now + 1) / 1000)
    finally:
        await conn.close()


async def test_leases_follow_the_server_clock(open_store: OpenStore) -> None:
    """A lease's expiry is server now + lease_ms; once it passes, the task is claimable again."""
    store = await open_store()
    task = await store.create(NewTask(new_task_id(), work=WorkSpec("job")))
    conn = await asyncpg.connect(store.dialect.connect_url)
    try:
        before = await conn.fetchval(SERVER_NOW_MS)
        # Long enough that the claim below surely runs while this lease is live.
        first = await store.claim("w1", lease_ms=2_000, task_id=task.task_id)
        after = await conn.fetchval(SERVER_NOW_MS)
    finally:
        await conn.close()
    assert first is not None
    assert before + 2_000 <= first.lease.expires_at <= after + 2_000
    assert await store.claim("w2", lease_ms=2_000, task_id=task.task_id) is None
    await wait_past(store.dialect.connect_url, first.lease.expires_at)
    second = await store.claim("w2", lease_ms=60_000, task_id=task.task_id)
    assert second is not None
    assert second.lease.generation == first.lease.generation + 1
    with pytest.raises(StaleLease):
        await store.put_status(task.task_id, Progress("late"), lease=first.lease)
