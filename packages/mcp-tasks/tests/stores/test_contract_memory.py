"""The Store contract against the memory store (the reference implementation)."""

from __future__ import annotations

import pytest

from mcp_tasks import MemoryBackend, MemoryTaskStore, Store, StoreOptions
from mcp_tasks_contract import StoreContract, StoreFactory


class TestMemoryStore(StoreContract):
    """Handles on one namespace share a MemoryBackend, as connections share a database."""

    stateful_max_examples = 60

    @pytest.fixture
    def store(self) -> StoreFactory:
        backends: dict[str, MemoryBackend] = {}

        async def open_store(namespace: str, options: StoreOptions) -> Store:
            return MemoryTaskStore(options, backend=backends.setdefault(namespace, MemoryBackend()))

        return open_store
