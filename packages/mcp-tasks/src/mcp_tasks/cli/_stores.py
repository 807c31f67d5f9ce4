"""Open the Store a command names, with the CLI's default and its one documented fallback."""

from __future__ import annotations

import importlib.util
import os
import sys
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING

from mcp_tasks.cli._errors import find, store_not_migrated, store_unreachable
from mcp_tasks.domain.errors import StoreNotMigrated, StoreUnavailable, TaskNotFound
from mcp_tasks.domain.ids import new_task_id
from mcp_tasks.domain.rules import ANY_OWNER
from mcp_tasks.stores.opening import URL_ENV, store_from_url

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mcp_tasks.domain.models import StoreOptions
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


def open_store(
    url: str | None, *, for_serving: bool = False, options: StoreOptions | None = None
) -> Store:
    """The Store for `url` (see `resolve_store_url`), with `options` (default: the defaults)."""
    return store_from_url(resolve_store_url(url, for_serving=for_serving), options)


@asynccontextmanager
async def using_store(url: str | None, options: StoreOptions | None = None) -> AsyncIterator[Store]:
    """The Store for `url`, closed afterwards; a store that cannot be reached inside the
    block becomes the CLI's one-line error (exit 6) naming the store and the cause."""
    store = open_store(url, options=options)
    try:
        yield store
    except BaseException as error:
        unavailable = find(error, StoreUnavailable)
        if isinstance(unavailable, StoreNotMigrated):
            raise store_not_migrated(store) from error
        if not isinstance(unavailable, StoreUnavailable):
            raise
        raise store_unreachable(store, unavailable) from error
    finally:
        with suppress(StoreUnavailable):  # closing what never opened: the error says why
            await store.close()


async def check_reachable(store: Store) -> None:
    """One read of a random id, which must answer "not found": the store is usable.

    On a SQL store this first use also creates the schema, as serving would.

    Raises:
        CLIError: the store cannot be reached (exit 6), naming the cause.
    """
    try:
        await store.get(new_task_id(), ANY_OWNER)
    except TaskNotFound:
        return
    except StoreUnavailable as error:
        raise store_unreachable(store, error) from error
