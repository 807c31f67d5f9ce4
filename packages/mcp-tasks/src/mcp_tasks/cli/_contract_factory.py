"""Store factories for `mcp-tasks contract`: a store URL made namespace-aware, per scheme."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from mcp_tasks.stores.memory import MemoryBackend, MemoryTaskStore
from mcp_tasks.stores.urls import store_from_url

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from mcp_tasks.models import StoreOptions
    from mcp_tasks.store import Store


def namespaced_url(url: str, namespace: str, scratch: Path) -> str:
    """`url` pointed at `namespace`: a SQLite file in `scratch`, a Postgres schema, or a
    `namespace` query parameter for other schemes (a third-party store may honour it)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "sqlite":
        return f"sqlite:///{scratch / (namespace + '.db')}"
    key = "schema" if scheme in {"postgresql", "postgres"} else "namespace"
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != key]
    return urlunsplit(parts._replace(query=urlencode([*query, (key, namespace)])))


def url_factory(url: str, scratch: str) -> Callable[[str, StoreOptions], Awaitable[Store]]:
    """An async `(namespace, options) -> Store` factory for the contract suite; SQLite files
    are created in `scratch` (a folder the caller removes)."""
    scheme = urlsplit(url).scheme.lower()
    backends: dict[str, MemoryBackend] = {}

    async def open_store(namespace: str, options: StoreOptions) -> Store:
        if scheme == "memory":
            # Handles on one namespace share their tasks, like connections to one database.
            backend = backends.setdefault(namespace, MemoryBackend())
            return MemoryTaskStore(options, backend=backend)
        return store_from_url(namespaced_url(url, namespace, Path(scratch)), options)

    return open_store


def module_factory(spec: str) -> Any:
    """The object `module:attr` names (the user's own factory)."""
    module_name, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module_name), attr)
