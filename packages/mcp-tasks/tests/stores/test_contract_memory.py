"""The Store contract against the memory store (the reference implementation), on a manual
clock (``offers.clock``): the suite moves time by advancing it, so no test waits for real
time to pass."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks import MemoryBackend, MemoryTaskStore, Store, StoreOptions
from mcp_tasks_contract import Offers, StatsContract, StoreContract, StoreFactory

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from mcp_tasks.domain.clock import ManualClock


class TestMemoryStore(StoreContract, StatsContract):
    """Handles on one namespace share a MemoryBackend, as connections share a database."""

    stateful_max_examples = 60
    # memory://NAME namespaces; in one process only, so no cross-process notifier and no
    # server to restart.
    offers = Offers(clock=True, namespaces=True, rewrite=True, counts=True)

    @pytest.fixture
    def backends(self) -> dict[str, MemoryBackend]:
        return {}

    @pytest.fixture
    def store(self, store_clock: ManualClock, backends: dict[str, MemoryBackend]) -> StoreFactory:
        async def open_store(namespace: str, options: StoreOptions) -> Store:
            backend = backends.setdefault(namespace, MemoryBackend())
            return MemoryTaskStore(options, clock=store_clock, backend=backend)

        return open_store

    @pytest.fixture
    def store_contents(
        self, backends: dict[str, MemoryBackend]
    ) -> Callable[[str], Awaitable[object]]:
        async def contents(namespace: str) -> object:
            return dict(backends[namespace].tasks)  # frozen records: equal only if unchanged

        return contents
