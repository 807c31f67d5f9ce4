"""S-DURABLE on SQLite: 1 000 tasks in all five statuses survive closing the store, unchanged;
claims stay valid until they expire."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks import StoreOptions
from mcp_tasks_contract.population import assert_survived, populate, snapshot

if TYPE_CHECKING:
    from conftest import OpenStore

pytestmark = pytest.mark.anyio


async def test_tasks_survive_close_and_reopen(open_store: OpenStore) -> None:
    """Every acknowledged write is in the file, unchanged, for a new handle after close()."""
    store = await open_store(StoreOptions(max_rows=None))
    ids, leases = await populate(store)
    before = await snapshot(store, ids)
    await store.close()
    await assert_survived(await open_store(StoreOptions(max_rows=None)), before, leases)
