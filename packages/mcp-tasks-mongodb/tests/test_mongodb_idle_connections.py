"""A pooled connection closed while it sat idle (by the server's idle timeout, a firewall, a
NAT or a load balancer) is news to PyMongo only when it next carries a request, which then
fails. PyMongo retries the reads and writes it knows; the store asks again the one command
it runs by name, ``hello`` (the server's clock), so no operation fails for a connection
the pool held too long."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest
from pymongo import AsyncMongoClient
from pymongo.monitoring import (
    ConnectionClosedEvent,
    ConnectionPoolListener,
)

from mcp_tasks import ANY_OWNER, NewTask, StoreOptions, new_task_id
from mcp_tasks.stores.opening import with_query
from mcp_tasks_contract.proxy import StoppableProxy, through
from mcp_tasks_mongodb import MongoTaskStore
from mcp_tasks_mongodb.driver import driver_timeouts

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

pytestmark = pytest.mark.anyio

#: The client's heartbeats, every half second, keep its monitor's connections busy: only
#: the pool's connection sits idle for :data:`IDLE_S`.
HEARTBEAT_MS = 500
IDLE_S = 1.5


class Pool(ConnectionPoolListener):
    """Why the client's pool closed connections: ``"error"`` for one that failed a
    request, ``"stale"`` for those dropped unused once its monitor found the server gone."""

    def __init__(self) -> None:
        self.closed: list[str] = []

    def connection_closed(self, event: ConnectionClosedEvent) -> None:
        self.closed.append(event.reason)

    # The pool's other events, heard and ignored (the base class raises on each).
    def pool_created(self, event: object) -> None:
        pass

    def pool_ready(self, event: object) -> None:
        pass

    def pool_cleared(self, event: object) -> None:
        pass

    def pool_closed(self, event: object) -> None:
        pass

    def connection_created(self, event: object) -> None:
        pass

    def connection_ready(self, event: object) -> None:
        pass

    def connection_check_out_started(self, event: object) -> None:
        pass

    def connection_check_out_failed(self, event: object) -> None:
        pass

    def connection_checked_out(self, event: object) -> None:
        pass

    def connection_checked_in(self, event: object) -> None:
        pass


async def test_operations_that_read_the_server_clock_survive_idle_connections_closed(
    mongodb_url: str, namespace: str
) -> None:
    """Before each of a reap, the stats, the counts and a create (each asks the server's
    clock first), the pool's connections closed once they sat idle while the client's
    monitor stays connected: each operation answers, having met a closed connection (the
    pool closes it for its error), and the task created before is read."""
    async with StoppableProxy.to(mongodb_url) as proxy:
        url = with_query(through(mongodb_url, proxy), heartbeatFrequencyMS=str(HEARTBEAT_MS))
        options = StoreOptions(timeout_ms=30_000)
        store = MongoTaskStore(url, options, prefix=namespace)
        pool = Pool()
        store._client = AsyncMongoClient(
            url, tz_aware=False, event_listeners=[pool], **driver_timeouts(url, options)
        )
        try:
            kept = await store.create(NewTask(new_task_id()))
            operations: dict[str, Callable[[], Awaitable[object]]] = {
                "reap": store.reap,
                "stats": store.stats,
                "counts": store.counts,
                "create": lambda: store.create(NewTask(new_task_id())),
            }
            for name, operation in operations.items():
                await anyio.sleep(IDLE_S + 0.2)
                assert proxy.cut_idle(IDLE_S) >= 1, name
                await anyio.sleep(0.2)  # the close has reached the client's socket
                pool.closed.clear()
                await operation()  # StoreUnavailable if the closed connection failed it
                assert "error" in pool.closed, name  # met by a request, not dropped unused
            assert (await store.get(kept.task_id, ANY_OWNER)).task_id == kept.task_id
        finally:
            await store.close()
