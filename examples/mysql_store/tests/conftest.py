"""The MariaDB / MySQL server the tests use, as the store's own provisioner gives it to the
contract suite's ``store_servers`` fixture: ``MCP_TASKS_TEST_MYSQL_URL``
(``mysql://root@127.0.0.1:3306/test`` on the project's machines). Without one the tests
skip, and fail when ``CI`` is set."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks_mysql.provision import connect

if TYPE_CHECKING:
    from mcp_tasks_contract import StoreServers

__all__ = ["connect"]  # the tests' own SQL: `from conftest import connect`


@pytest.fixture(scope="session")
def mysql_url(store_servers: StoreServers) -> str:
    """The server's URL (:mod:`mcp_tasks_mysql.provision`: the environment's, once it
    accepted a connection)."""
    return store_servers.url("mysql")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
