"""``store_from_url``: pick a Store by URL scheme through the ``mcp_tasks.stores`` entry points."""

from __future__ import annotations

import os
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

from mcp_tasks.errors import MCPTasksError

if TYPE_CHECKING:
    from mcp_tasks.models import StoreOptions
    from mcp_tasks.store import Store

ENTRY_POINT_GROUP = "mcp_tasks.stores"
URL_ENV = "MCP_TASKS_STORE_URL"

# Schemes of the in-repo backends → the extra that brings each one.
KNOWN_EXTRAS: dict[str, str] = {
    "sqlite": "sqlite",
    "postgresql": "postgres",
    "postgres": "postgres",
    "redis": "redis",
    "rediss": "redis",
    "mongodb": "mongodb",
    "mongodb+srv": "mongodb",
}


class StoreFactory(Protocol):
    """What a ``mcp_tasks.stores`` entry point loads: URL (+ options) → Store."""

    def __call__(self, url: str, options: StoreOptions | None = None, /) -> Store: ...


class UnknownStoreScheme(MCPTasksError, ValueError):
    """No installed Store handles this URL scheme."""


def store_from_url(url: str | None = None, options: StoreOptions | None = None) -> Store:
    """The Store for ``url`` (or ``$MCP_TASKS_STORE_URL``), e.g. ``sqlite:///tasks.db``.

    Raises:
        UnknownStoreScheme: no installed package registers the scheme; for an in-repo
            backend the message is the exact ``pip install`` line that brings it.
    """
    url = url or os.environ.get(URL_ENV)
    if not url:
        raise UnknownStoreScheme(f"No store URL given and {URL_ENV} is not set")
    scheme = urlsplit(url).scheme.lower()
    if not scheme:
        raise UnknownStoreScheme("A store URL needs a scheme, e.g. memory:// or sqlite:///tasks.db")
    for entry in entry_points(group=ENTRY_POINT_GROUP, name=scheme):
        factory: StoreFactory = entry.load()
        return factory(url, options)
    extra = KNOWN_EXTRAS.get(scheme)
    if extra is not None:
        raise UnknownStoreScheme(
            f'The {scheme}:// store is not installed: pip install "mcp-tasks[{extra}]"'
        )
    raise UnknownStoreScheme(
        f"No store is registered for {scheme}://; a third-party store registers its scheme "
        f"in the {ENTRY_POINT_GROUP!r} entry-point group"
    )
