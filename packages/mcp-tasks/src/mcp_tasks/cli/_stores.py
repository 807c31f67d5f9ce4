"""Open the Store a command names, with the CLI's default and its one documented fallback."""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import TYPE_CHECKING

from mcp_tasks.stores.opening import URL_ENV, store_from_url

if TYPE_CHECKING:
    from mcp_tasks.stores.protocol import Store

DEFAULT_STORE_URL = "sqlite:///./mcp-tasks.db"


def resolve_store_url(url: str | None, *, for_serving: bool = False) -> str:
    """The URL to open: `--store`, else `$MCP_TASKS_STORE_URL`, else the SQLite default.

    Without the SQLite store installed (`mcp-tasks[sqlite]`), `serve` falls back to
    `memory://` with a warning on stderr, so a fresh install still serves; admin commands
    do not fall back, since running them on a throwaway memory store would prove nothing.
    """
    chosen = url or os.environ.get(URL_ENV)
    if chosen:
        return chosen
    if for_serving and importlib.util.find_spec("mcp_tasks_sqlite") is None:
        print(
            'warning: the SQLite store is not installed (pip install "mcp-tasks[sqlite]"); '
            "serving from memory:// — tasks will not survive a restart",
            file=sys.stderr,
        )
        return "memory://"
    return DEFAULT_STORE_URL


def open_store(url: str | None, *, for_serving: bool = False) -> Store:
    """The Store for `url` (see `resolve_store_url`)."""
    return store_from_url(resolve_store_url(url, for_serving=for_serving))
