"""PyMongo as the store uses it: the driver failures that surface as
:class:`~mcp_tasks.domain.errors.StoreUnavailable`, its timeouts, and the server's clock."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

from pymongo.errors import PyMongoError

from mcp_tasks.stores.kit import DriverErrors
from mcp_tasks_mongodb.codec import epoch_ms

if TYPE_CHECKING:
    from pymongo.asynchronous.database import AsyncDatabase

    from mcp_tasks.domain.models import StoreOptions
    from mcp_tasks_mongodb.codec import Document

__all__ = ["DRIVER_ERRORS", "UNAVAILABLE", "driver_timeouts", "server_now"]

#: PyMongo's timeouts the store sets from its bound (PyMongo's own defaults: 30 s to select
#: a server, 20 s to connect, no socket timeout: a request would wait that long).
_TIMEOUTS = ("serverSelectionTimeoutMS", "connectTimeoutMS", "socketTimeoutMS")

#: The driver failures that mean the server could not be reached or did not answer.
DRIVER_ERRORS: tuple[type[BaseException], ...] = (PyMongoError, OSError, TimeoutError)
#: ``with UNAVAILABLE:`` raises those as StoreUnavailable, the driver error as cause.
UNAVAILABLE = DriverErrors(*DRIVER_ERRORS)


def driver_timeouts(url: str, options: StoreOptions) -> dict[str, Any]:
    """PyMongo's server selection, connect and socket timeouts, each the store's bound,
    except those the URL sets itself."""
    given = {key.lower() for key, _ in parse_qsl(urlsplit(url).query)}
    return {key: options.timeout_ms for key in _TIMEOUTS if key.lower() not in given}


async def server_now(db: AsyncDatabase[Document]) -> int:
    """The server's clock (epoch ms), from ``hello``."""
    with UNAVAILABLE:
        hello = await db.client.admin.command("hello")
    return epoch_ms(hello["localTime"])
