"""The Store contract against the memory store (the reference implementation), on a manual
clock: the suite moves time by advancing it, so no test waits for real time to pass."""

from __future__ import annotations

import pytest

from mcp_tasks import MemoryBackend, MemoryTaskStore, Store, StoreOptions
from mcp_tasks.domain.clock import ManualClock
from mcp_tasks_contract import StoreContract, StoreFactory


class TestMemoryStore(StoreContract):
    """Handles on one namespace share a MemoryBackend, as connections share a database."""

    stateful_max_examples = 60

    @pytest.fixture
    def store_clock(self) -> ManualClock:
        return ManualClock()

    @pytest.fixture
    def store(self, store_clock: ManualClock) -> StoreFactory:
        backends: dict[str, MemoryBackend] = {}

        async def open_store(namespace: str, options: StoreOptions) -> Store:
            backend = backends.setdefault(namespace, MemoryBackend())
            return MemoryTaskStore(options, clock=store_clock, backend=backend)

        return open_store
