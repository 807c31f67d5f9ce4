"""The real store servers of the commands' tests, each as its backend provisions it
(``store_servers``: a missing one skips locally and fails when ``CI`` is set)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from mcp_tasks_contract import StoreServers


@pytest.fixture(scope="session")
def postgres_url(store_servers: StoreServers) -> str:
    return store_servers.url("postgresql")


@pytest.fixture(scope="session")
def redis_url(store_servers: StoreServers) -> str:
    return store_servers.url("redis")
