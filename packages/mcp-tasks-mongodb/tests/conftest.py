"""Fixtures for the MongoDB store's own tests: a real server (``mongodb_url``: the
environment's ``MCP_TASKS_TEST_MONGODB_URL``, else the embedded SecantusDB server; see
:mod:`mcp_tasks_mongodb.provision`) and a fresh collection prefix per test, dropped
afterwards."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from mcp_tasks_contract import UrlStoreFactory
from mcp_tasks_mongodb import MongoTaskStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from mcp_tasks import StoreOptions
    from mcp_tasks_contract import StoreServers

    OpenStore = Callable[..., Awaitable[MongoTaskStore]]


@pytest.fixture(scope="session")
def mongodb_store_url(store_servers: StoreServers) -> str:
    """The URL stores are opened on at ``mongodb_url`` (a longer bound on the embedded
    server: :func:`mcp_tasks_mongodb.provision.mongodb_store_url` says why); never PyMongo's."""
    return store_servers.store_url("mongodb")


@pytest.fixture
async def open_store(mongodb_url: str, namespace: str) -> AsyncIterator[OpenStore]:
    """Opens new handles (each its own client; keyword arguments go to MongoTaskStore)
    on this test's prefix; closes them and drops the prefix afterwards."""
    async with UrlStoreFactory(mongodb_url) as stores:
        stores.namespace_url(namespace)  # dropped at the end

        async def open_store(options: StoreOptions | None = None, **kwargs: Any) -> MongoTaskStore:
            return stores.keep(MongoTaskStore(mongodb_url, options, prefix=namespace, **kwargs))

        yield open_store


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """PyMongo's async server monitors may close their socket a moment after
    ``AsyncMongoClient.close()`` returned; when the garbage collector meets such a socket
    first, a ResourceWarning lands in whichever test runs then (seen about once in ten
    runs of this package's tests). Only that warning is ignored, and only here."""
    here = str(Path(__file__).parent)
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.filterwarnings("ignore:unclosed <socket:ResourceWarning"))
            item.add_marker(
                pytest.mark.filterwarnings(
                    "ignore:Exception ignored in. <socket:pytest.PytestUnraisableExceptionWarning"
                )
            )
