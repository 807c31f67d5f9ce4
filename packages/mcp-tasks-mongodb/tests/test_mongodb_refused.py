"""A MongoDB server that refuses connections (its process killed: nothing listens on its
port) fails the store's operations at the client's first heartbeat that finds it so, not
at the end of the store's bound, which PyMongo's server selection would wait out; a
server that is back is used again. :class:`~mcp_tasks_mongodb.driver.Refusals` reads the
heartbeats: only a server the client has heard from refusing counts, every one of them."""

from __future__ import annotations

import errno
import time
from typing import TYPE_CHECKING

import anyio
import pytest
from pymongo.errors import AutoReconnect, NetworkTimeout
from pymongo.monitoring import ServerHeartbeatFailedEvent, ServerHeartbeatSucceededEvent

from mcp_tasks import ANY_OWNER, NewTask, StoreOptions, StoreUnavailable, new_task_id
from mcp_tasks_contract.store_servers import unavailable
from mcp_tasks_mongodb import MongoTaskStore
from mcp_tasks_mongodb.driver import Refusals
from mcp_tasks_mongodb.provision import own_mongodb

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

pytestmark = pytest.mark.anyio

#: Far longer than a heartbeat's news takes (about 0.5 s): an operation that waited it out
#: fails from the bound's TimeoutError, not from the refusal.
BOUND_MS = 30_000
REFUSED = f"[Errno {errno.ECONNREFUSED}]"


async def test_a_refused_server_fails_the_operations_from_the_refusal() -> None:
    """The server killed: a read, a create and a cancel at once each raise StoreUnavailable
    whose cause is the refused connection (not the bound's timeout, 30 s), twice; the
    server started again, the same store reads and creates."""
    with own_mongodb(sync_on_commit=True) as server:  # the kept task survives the kill
        if server is None:
            unavailable("own MongoDB", "install the SecantusDB test dependency")
        store = MongoTaskStore(server.url, StoreOptions(timeout_ms=BOUND_MS), prefix="refused")
        try:
            kept = await store.create(NewTask(new_task_id()))
            await anyio.to_thread.run_sync(server.kill)
            causes: dict[str, BaseException | None] = {}

            operations: dict[str, Callable[[], Awaitable[object]]] = {
                "get": lambda: store.get(kept.task_id, ANY_OWNER),
                "create": lambda: store.create(NewTask(new_task_id())),
                "cancel": lambda: store.cancel(kept.task_id, ANY_OWNER),
            }

            async def failing(name: str) -> None:
                with pytest.raises(StoreUnavailable) as raised:
                    await operations[name]()
                causes[name] = raised.value.__cause__

            # Twice: the second round's operations find the server already unknown to the
            # client, and only a heartbeat's news ends their wait for it.
            for _ in range(2):
                async with anyio.create_task_group() as group:
                    for name in operations:
                        group.start_soon(failing, name)
                for name, cause in causes.items():
                    assert isinstance(cause, AutoReconnect), (name, cause)
                    assert REFUSED in str(cause), (name, cause)

            await anyio.to_thread.run_sync(server.start)
            deadline = time.monotonic() + 30  # the server's start is not what is tested
            while True:
                try:
                    assert (await store.get(kept.task_id, ANY_OWNER)).task_id == kept.task_id
                    break
                except StoreUnavailable:
                    if time.monotonic() > deadline:
                        raise
            await store.create(NewTask(new_task_id()))
        finally:
            await store.close()


def failed(address: tuple[str, int], error: Exception) -> ServerHeartbeatFailedEvent:
    return ServerHeartbeatFailedEvent(0.001, error, address, False)


def refused(address: tuple[str, int]) -> ServerHeartbeatFailedEvent:
    return failed(address, AutoReconnect(f"{address[0]}:{address[1]}: {REFUSED} Connect failed"))


async def test_only_every_server_refusing_is_news() -> None:
    """Of two servers the client heard from, one refusing while the other answers is no news
    (a replica set's member down); both refusing is, with the heartbeat's error; a timeout
    (a silent server) is no refusal; a server that answers again ends its refusal."""
    a, b = ("a", 27017), ("b", 27017)
    refusals = Refusals()
    news = refusals.next()
    refusals.succeeded(ServerHeartbeatSucceededEvent(0.001, {"ok": 1}, a, False))
    refusals.failed(refused(b))
    assert not news.done()
    refusals.failed(failed(a, NetworkTimeout("a:27017: timed out")))
    assert not news.done()
    refusals.failed(refused(a))
    assert news.done()
    assert REFUSED in str(news.result())

    later = refusals.next()
    assert later is not news
    refusals.succeeded(ServerHeartbeatSucceededEvent(0.001, {"ok": 1}, a, False))
    refusals.failed(refused(b))
    assert not later.done()
