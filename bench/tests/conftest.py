"""The database servers of the suite's CPU-accounting tests (each backend's own test
server, ``store_servers``: the environment's, else an embedded one; a missing one skips
locally and fails in CI)."""

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
