"""S-CALLER: a caller's mistake raises ``ValueError``, never ``StoreUnavailable``."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import pytest

from mcp_tasks_contract.suite.base import (
    LONG_LEASE_MS,
    ContractBase,
    assert_unchanged,
    current,
    job,
    new_task,
    outcome_of,
)

if TYPE_CHECKING:
    from mcp_tasks_contract.handles import StoreHandles

#: Leases no worker can hold.
NON_POSITIVE_MS = (0, -1)


class CallerContract(ContractBase):
    """S-CALLER."""

    @pytest.mark.rule("S-CALLER", "INV-NOPARTIAL")
    async def test_a_non_positive_lease_is_the_callers_error(self, handles: StoreHandles) -> None:
        """claim of an eligible task (by id or the next one) and renew of a live lease with
        lease_ms 0 or negative raise ValueError and write nothing: the task stays unclaimed,
        the live claim stays as it was and can still be renewed."""
        store = await handles.open()
        record = await new_task(store, work=job())
        claims = [
            await outcome_of(partial(store.claim, "w1", lease_ms=lease_ms, task_id=task_id))
            for lease_ms in NON_POSITIVE_MS
            for task_id in (record.task_id, None)
        ]
        assert all(isinstance(outcome, ValueError) for outcome in claims), claims
        await assert_unchanged(store, record)

        claimed = await store.claim("w1", lease_ms=LONG_LEASE_MS, task_id=record.task_id)
        assert claimed is not None
        held = await current(store, record.task_id)
        renewals = [
            await outcome_of(partial(store.renew, claimed.lease, lease_ms=lease_ms))
            for lease_ms in NON_POSITIVE_MS
        ]
        assert all(isinstance(outcome, ValueError) for outcome in renewals), renewals
        await assert_unchanged(store, held)
        renewed = await store.renew(claimed.lease, lease_ms=LONG_LEASE_MS)
        assert renewed.generation == claimed.lease.generation
