"""PyMongo as the store uses it: every driver call in :func:`driver_call` (its failures
surface as :class:`~mcp_tasks.domain.errors.StoreUnavailable`, and a cancellation waits
for it), the store's bound as PyMongo's own timeouts (:func:`driver_timeouts`,
:func:`bounded`), and the server's clock.

Why a driver call is never cancelled: on Python 3.11 PyMongo waits for a server (and for
a pooled connection) with ``asyncio.wait_for`` on a condition of the client's topology,
which runs the wait in a second task. A cancellation that comes again while ``wait_for``
cancels that task, as an anyio cancel scope's does until the task leaves the scope, makes
``wait_for`` return while its task still re-acquires the condition's lock: the caller then
releases a lock it no longer holds, and the client's next waits fail with
``RuntimeError("cannot wait on un-acquired lock")`` or hang. So the store never cancels
PyMongo: the driver's own deadline (``timeoutMS``, PyMongo's client-side operation
timeout) ends every call within the bound, and a cancellation from outside (a request
that ends, a server that stops) takes effect when the call returns."""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

import anyio
import pymongo
from pymongo.errors import PyMongoError

from mcp_tasks.stores.kit import DriverErrors, within
from mcp_tasks_mongodb.codec import epoch_ms

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pymongo.asynchronous.database import AsyncDatabase

    from mcp_tasks.domain.models import StoreOptions
    from mcp_tasks_mongodb.codec import Document

__all__ = ["DRIVER_ERRORS", "bounded", "driver_call", "driver_timeouts", "server_now"]

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
def bounded(timeout_ms: int) -> Iterator[None]:
    """One store operation of several driver calls within ``timeout_ms`` overall: PyMongo's
    deadline for the calls together (``pymongo.timeout``), and :func:`within` for the
    store's own waits between them (its in-process queues)."""
    with within(timeout_ms), pymongo.timeout(timeout_ms / 1000):
        yield


def driver_timeouts(url: str, options: StoreOptions) -> dict[str, Any]:
    """PyMongo's operation, server selection, connect and socket timeouts, each the
    store's bound, except those the URL sets itself."""
    given = {key.lower() for key, _ in parse_qsl(urlsplit(url).query)}
    return {key: options.timeout_ms for key in _TIMEOUTS if key.lower() not in given}


async def server_now(db: AsyncDatabase[Document]) -> int:
    """The server's clock (epoch ms), from ``hello``."""
    with driver_call():
        hello = await db.client.admin.command("hello")
    return epoch_ms(hello["localTime"])
