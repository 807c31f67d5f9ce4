"""The SQLite store's injectable clock drives TTLs, leases and retries."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks import (
    ANY_OWNER,
    ManualClock,
    NewTask,
    Retry,
    StaleLease,
    TaskNotFound,
    WorkSpec,
    new_task_id,
)

if TYPE_CHECKING:
    from conftest import OpenStore

pytestmark = pytest.mark.anyio


async def test_injected_clock_drives_ttl_leases_and_retries(open_store: OpenStore) -> None:
    """TTL expiry, lease expiry and retry delays all follow the injected clock."""
    clock = ManualClock()
    store = await open_store(clock=clock)
    task = await store.create(
        NewTask(new_task_id(), ttl_ms=10_000, work=WorkSpec("j", None, retry_delays_ms=(500,)))
    )
    first = await store.claim("w1", lease_ms=1_000)
    assert first is not None
    assert first.lease.expires_at == clock() + 1_000
    clock.advance(1_000)
    second = await store.claim("w2", lease_ms=1_000)
    assert second is not None
    with pytest.raises(StaleLease):
        await store.renew(first.lease, lease_ms=1_000)
    retried = await store.put_status(
        task.task_id, Retry({"code": 1, "message": "again"}), lease=second.lease
    )
    assert retried.record.retry_at == clock() + 500
    assert await store.claim("w3", lease_ms=1_000) is None
    clock.advance(500)
    assert await store.claim("w3", lease_ms=1_000) is not None
    clock.advance(10_000)
    with pytest.raises(TaskNotFound):
        await store.get(task.task_id, ANY_OWNER)
    assert await store.reap() == 1
