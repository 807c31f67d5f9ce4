"""PyMongo as the store uses it: every driver call in :func:`driver_call` (its failures
surface as :class:`~mcp_tasks.domain.errors.StoreUnavailable`, and a cancellation of its
task waits for it), the store's bound as PyMongo's own timeouts (:func:`driver_timeouts`,
:func:`bounded`), and the server's clock.

Why a driver call is never cancelled: on Python 3.11 PyMongo waits for a server (and for
a pooled connection) with ``asyncio.wait_for`` on a condition of the client's topology,
which runs the wait in a second task. A cancellation that comes again while ``wait_for``
cancels that task, as an anyio cancel scope's does until the task leaves the scope, makes
``wait_for`` return while its task still re-acquires the condition's lock: the caller then
releases a lock it no longer holds, and the client's next waits fail with
``RuntimeError("cannot wait on un-acquired lock")`` or hang. So the store never cancels
PyMongo: the driver's own deadline (``timeoutMS``, PyMongo's client-side operation
timeout) ends every call. PyMongo looks at that deadline only now and then (every 0.5 s
while it waits for a server), so an operation runs in a task of its own
(:func:`bounded`, :func:`~mcp_tasks.stores.kit.detached`): its caller stops waiting at
the deadline (its request's, or a cancellation from outside), and the calls end a moment
later, unwaited for.

A server that refuses connections (nothing listens on its port: killed, stopped, being
restarted) is one PyMongo waits for until the deadline, whereas the other stores' drivers
fail at the refused connect. The client's heartbeats tell it sooner (:class:`Refusals`):
an operation stops waiting at the first heartbeat after its start that finds every server
the client has heard from refusing connections (a heartbeat comes within about 0.5 s while
an operation waits for a server). A silent or slow server refuses nothing: there the
operation waits for its deadline, as before."""

from __future__ import annotations

import asyncio
import errno
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, urlsplit

import anyio
import pymongo
from pymongo import monitoring
from pymongo.errors import AutoReconnect, PyMongoError

from mcp_tasks.stores.kit import DriverErrors, detached, within
from mcp_tasks_mongodb.codec import epoch_ms

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

    from pymongo.asynchronous.database import AsyncDatabase
    from pymongo.asynchronous.mongo_client import AsyncMongoClient

    from mcp_tasks.domain.models import StoreOptions
    from mcp_tasks_mongodb.codec import Document

__all__ = [
    "DRIVER_ERRORS",
    "Refusals",
    "bounded",
    "detached_within",
    "driver_call",
    "driver_timeouts",
    "hello",
    "server_now",
]

R = TypeVar("R")

#: PyMongo's timeouts the store sets from its bound: ``timeoutMS`` bounds each operation
#: whole (server selection, a pooled connection, the round trip, retries); the others each
#: step (PyMongo's own defaults: 30 s to select a server, 20 s to connect, no socket
#: timeout, no operation timeout).
_TIMEOUTS = ("timeoutMS", "serverSelectionTimeoutMS", "connectTimeoutMS", "socketTimeoutMS")

#: The driver failures that mean the server could not be reached or did not answer.
DRIVER_ERRORS: tuple[type[BaseException], ...] = (PyMongoError, OSError, TimeoutError)
_UNAVAILABLE = DriverErrors(*DRIVER_ERRORS)


@contextmanager
def driver_call() -> Iterator[None]:
    """Around PyMongo calls: the failures in :data:`DRIVER_ERRORS` raised as
    StoreUnavailable (the driver error as cause), and the calls shielded from cancellation
    (see the module docstring; the driver's deadline ends them)."""
    with anyio.CancelScope(shield=True), _UNAVAILABLE:
        yield


@contextmanager
def bounded(timeout_ms: int) -> Iterator[float]:
    """One store operation of several driver calls within ``timeout_ms`` overall, or what
    is left of its request's bound (:func:`~mcp_tasks.stores.kit.within`): PyMongo's
    deadline for the calls together (``pymongo.timeout``: server selection, a pooled
    connection, connecting, each round trip), and :func:`within` for the store's own waits
    between them (its in-process queues). Yields that deadline (``anyio.current_time()``).

    PyMongo ends a call at its deadline only at its next look at the clock (a wait for a
    server looks every 0.5 s), and a call is never cancelled: the operations a request
    waits for run in :func:`detached_within` instead."""
    with within(timeout_ms) as left_s, pymongo.timeout(left_s):
        yield anyio.current_time() + left_s


async def detached_within(
    timeout_ms: int, operation: Callable[[float], Awaitable[R]], refusals: Refusals | None = None
) -> R:
    """``operation`` :func:`bounded` (it gets the deadline), in a task of its own
    (:func:`~mcp_tasks.stores.kit.detached`): the caller stops waiting at the deadline, or
    at the first heartbeat of ``refusals`` (its client's) that finds the server refusing
    connections, and the operation ends a moment later by PyMongo's, unwaited for."""
    with within(timeout_ms) as left_s:
        deadline = anyio.current_time() + left_s

        async def run() -> R:
            # A task of its own, no part of the request: its deadline comes as a number.
            with anyio.fail_after(left_s), pymongo.timeout(left_s):
                return await operation(deadline)

        return await detached(run(), gone=None if refusals is None else refusals.next())


#: How a refused connect reads in PyMongo's error (it keeps only the text of the OSError:
#: the monitor clears every error's cause).
_REFUSED = f"[Errno {errno.ECONNREFUSED}]"


class Refusals(monitoring.ServerHeartbeatListener):
    """A client's heartbeats (one listener per client, in its ``event_listeners``), as news
    that its servers refuse connections: :meth:`next` is done, with the heartbeat's error,
    at the first failed heartbeat from now on after which every server the client has heard
    from refuses them (its last heartbeat failed so). A replica set's member that is down
    while the primary answers is no such news."""

    def __init__(self) -> None:
        self._refusing: dict[Any, bool] = {}  # server address → its last heartbeat refused
        self._next: asyncio.Future[BaseException] | None = None

    def __repr__(self) -> str:
        return f"Refusals(refusing={sorted(a for a, no in self._refusing.items() if no)})"

    def next(self) -> asyncio.Future[BaseException]:
        """Done at the next heartbeat that finds every server refusing connections."""
        waiting = self._next
        loop = asyncio.get_running_loop()
        if waiting is None or waiting.done() or waiting.get_loop() is not loop:
            waiting = self._next = loop.create_future()
        return waiting

    def started(self, event: monitoring.ServerHeartbeatStartedEvent) -> None:
        pass

    def succeeded(self, event: monitoring.ServerHeartbeatSucceededEvent) -> None:
        self._refusing[event.connection_id] = False

    def failed(self, event: monitoring.ServerHeartbeatFailedEvent) -> None:
        refused = _REFUSED in str(event.reply)
        self._refusing[event.connection_id] = refused
        waiting = self._next
        if refused and all(self._refusing.values()) and waiting and not waiting.done():
            waiting.set_result(event.reply)


def driver_timeouts(url: str, options: StoreOptions) -> dict[str, Any]:
    """PyMongo's operation, server selection, connect and socket timeouts, each the
    store's bound, except those the URL sets itself."""
    given = {key.lower() for key, _ in parse_qsl(urlsplit(url).query)}
    return {key: options.timeout_ms for key in _TIMEOUTS if key.lower() not in given}


async def hello(client: AsyncMongoClient[Document]) -> Document:
    """The server's ``hello`` reply, asked again once on a connection error, as PyMongo
    retries the reads it knows (it retries no command run by name). A pooled connection the
    server, a proxy or a firewall closed while it was idle fails the request it next carries
    (the close reaches the client only then); the second try takes a new one."""
    try:
        return await client.admin.command("hello")
    except AutoReconnect:
        return await client.admin.command("hello")


async def server_now(db: AsyncDatabase[Document]) -> int:
    """The server's clock (epoch ms), from :func:`hello`."""
    with driver_call():
        reply = await hello(db.client)
    return epoch_ms(reply["localTime"])
