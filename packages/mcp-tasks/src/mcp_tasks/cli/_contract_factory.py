"""Store factories for `mcp-tasks contract`: a store URL made namespace-aware, per scheme."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from mcp_tasks.stores.memory import MemoryBackend, MemoryTaskStore
from mcp_tasks.stores.urls import store_from_url

if TYPE_CHECKING:
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


class UrlStoreFactory:
    """An async `(namespace, options) -> Store` factory for the contract suite.

    SQLite files go to `scratch` (a folder the caller removes); Postgres schemas it created
    are dropped by `aclose()`.
    """

    def __init__(self, url: str, scratch: str) -> None:
        self.url = url
        self.scheme = urlsplit(url).scheme.lower()
        self.scratch = Path(scratch)
        self._backends: dict[str, MemoryBackend] = {}
        self._namespaces: set[str] = set()

    async def __call__(self, namespace: str, options: StoreOptions) -> Store:
        self._namespaces.add(namespace)
        if self.scheme == "memory":
            # Handles on one namespace share their tasks, like connections to one database.
            backend = self._backends.setdefault(namespace, MemoryBackend())
            return MemoryTaskStore(options, backend=backend)
        return store_from_url(namespaced_url(self.url, namespace, self.scratch), options)

    async def aclose(self) -> None:
        if self.scheme not in {"postgresql", "postgres"} or not self._namespaces:
            return
        import asyncpg  # noqa: PLC0415 - only present with the postgres extra

        parts = urlsplit(self.url)
        conn = await asyncpg.connect(urlunsplit(parts._replace(query="")))
        try:
            for namespace in self._namespaces:  # generated names: letters, digits, "_"
                await conn.execute(f'DROP SCHEMA IF EXISTS "{namespace}" CASCADE')
        finally:
            await conn.close()


def module_factory(spec: str) -> Any:
    """The object `module:attr` names (the user's own factory)."""
    module_name, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module_name), attr)
