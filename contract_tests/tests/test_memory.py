"""The Store contract against the memory store (the reference implementation)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks import MemoryBackend, MemoryTaskStore, Store, StoreOptions, StoreUnavailable
from mcp_tasks_contract import StoreContract, StoreFactory

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


class TestMemoryStore(StoreContract):
    """Handles on one namespace share a MemoryBackend, as connections share a database."""

    stateful_max_examples = 60

    @pytest.fixture
    async def store(self) -> AsyncIterator[StoreFactory]:
        backends: dict[str, MemoryBackend] = {}
        opened: list[Store] = []

        async def open_store(namespace: str, options: StoreOptions) -> Store:
            backend = backends.setdefault(namespace, MemoryBackend())
            handle = MemoryTaskStore(options, backend=backend)
            opened.append(handle)
            return handle

        yield open_store
        # The suite closes every handle it opened (a closed memory handle refuses work).
        for handle in opened:
            with pytest.raises(StoreUnavailable):
                await handle.reap()
