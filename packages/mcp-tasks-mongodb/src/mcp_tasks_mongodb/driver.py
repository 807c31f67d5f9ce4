"""PyMongo as the store uses it: the driver failures that surface as
:class:`~mcp_tasks.domain.errors.StoreUnavailable`, and the server's clock."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pymongo.errors import PyMongoError

from mcp_tasks.stores.kit import DriverErrors
from mcp_tasks_mongodb.codec import epoch_ms

if TYPE_CHECKING:
    from pymongo.asynchronous.database import AsyncDatabase

    from mcp_tasks_mongodb.codec import Document

__all__ = ["DRIVER_ERRORS", "UNAVAILABLE", "server_now"]

#: The driver failures that mean the server could not be reached or did not answer.
DRIVER_ERRORS: tuple[type[BaseException], ...] = (PyMongoError, OSError, TimeoutError)
#: ``with UNAVAILABLE:`` raises those as StoreUnavailable, the driver error as cause.
UNAVAILABLE = DriverErrors(*DRIVER_ERRORS)


async def server_now(db: AsyncDatabase[Document]) -> int:
    """The server's clock (epoch ms), from ``hello``."""
    with UNAVAILABLE:
        hello = await db.client.admin.command("hello")
    return epoch_ms(hello["localTime"])
