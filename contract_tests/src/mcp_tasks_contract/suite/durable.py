"""S-DURABLE: a new handle on the same namespace finds every acknowledged write."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks import Outcome, Progress
from mcp_tasks_contract.population import TASKS, assert_survived, populate, snapshot
from mcp_tasks_contract.suite.base import LONG_LEASE_MS, ContractBase, current, job, new_task
from mcp_tasks_contract.suite.reap import one_of_each_status

if TYPE_CHECKING:
    from mcp_tasks_contract.handles import StoreHandles


class DurableContract(ContractBase):
    """S-DURABLE."""

    @pytest.mark.rule("S-DURABLE")
    async def test_reopening_loses_no_acknowledged_write(self, handles: StoreHandles) -> None:
        """After close, a new handle sees every task (all five statuses) unchanged; a live
        claim is still valid and a recorded event id still replays as a duplicate."""
        first = await handles.open()
        written = await one_of_each_status(first, ttl_ms=3_600_000)
        leased = await new_task(first, work=job())
        claimed = await first.claim("w1", lease_ms=LONG_LEASE_MS, task_id=leased.task_id)
        assert claimed is not None
        noted = await first.put_status(
            leased.task_id, Progress("noted"), lease=claimed.lease, event_id="ev-1"
        )
        written.append(noted.record)
        await first.close()

        second = await handles.open()
        for record in written:
            assert await current(second, record.task_id) == record
        renewed = await second.renew(claimed.lease, lease_ms=LONG_LEASE_MS)
        assert renewed.generation == claimed.lease.generation
        replay = await second.put_status(
            leased.task_id, Progress("noted"), lease=renewed, event_id="ev-1"
        )
        assert (replay.outcome, replay.revision) == (Outcome.DUPLICATE, noted.revision)
        applied = await second.put_status(leased.task_id, Progress("after"), lease=renewed)
        assert applied.outcome is Outcome.APPLIED

    @pytest.mark.rule("S-DURABLE")
    async def test_a_thousand_tasks_survive_reopening(self, handles: StoreHandles) -> None:
        """1 000 tasks, 200 in each status, with owners, TTLs, payloads, live claims and
        partly answered input, are all identical on a new handle after close, and their
        claims can still be renewed at the same generation."""
        first = await handles.open()
        ids, leases = await populate(first)
        assert len(ids) == TASKS
        before = await snapshot(first, ids)
        await first.close()
        await assert_survived(await handles.open(), before, leases)
