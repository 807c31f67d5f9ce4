"""The Store contract against the memory store (the reference implementation), on a manual
clock (``offers.clock``): the suite moves time by advancing it, so no test waits for real
time to pass."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks import MemoryBackend, MemoryTaskStore, Store, StoreOptions
from mcp_tasks_contract import Offers, StoreContract, StoreFactory

if TYPE_CHECKING:
    from mcp_tasks.domain.clock import ManualClock


class TestMemoryStore(StoreContract):
    """Handles on one namespace share a MemoryBackend, as connections share a database."""

    stateful_max_examples = 60
    # memory://NAME namespaces; in one process only, so no cross-process notifier and no
    # server to restart.
    offers = Offers(clock=True, namespaces=True)

    @pytest.fixture
    def store(self, store_clock: ManualClock) -> StoreFactory:
        backends: dict[str, MemoryBackend] = {}

        async def open_store(namespace: str, options: StoreOptions) -> Store:
            backend = backends.setdefault(namespace, MemoryBackend())
            return MemoryTaskStore(options, clock=store_clock, backend=backend)

        return open_store
