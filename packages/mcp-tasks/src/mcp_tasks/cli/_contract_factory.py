"""Store factories for `mcp-tasks contract`: one namespace of the target store per test."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from mcp_tasks.stores.opening import (
    NamespacesNotSupported,
    drop_namespace,
    namespaced_url,
    store_from_url,
    with_query,
)

if TYPE_CHECKING:
    from mcp_tasks.domain.models import StoreOptions
    from mcp_tasks.stores.protocol import Store


class UrlStoreFactory:
    """An async `(namespace, options) -> Store` factory for the contract suite.

    Each namespace is the backend's own (a memory name, a SQLite table prefix, a Postgres
    schema: :func:`~mcp_tasks.stores.opening.namespaced_url`), dropped by `aclose()`. A
    `sqlite://` URL without a path uses a file in `scratch`. A store without namespaces gets
    a `?namespace=` query parameter, which a third-party store may honour.
    """

    def __init__(self, url: str, scratch: str) -> None:
        parts = urlsplit(url)
        if parts.scheme.lower() == "sqlite" and len(parts.path) < 2:
            url = f"sqlite:///{Path(scratch) / 'contract.db'}"
        self.url = url
        self._dropped_by_us: list[str] = []

    async def __call__(self, namespace: str, options: StoreOptions) -> Store:
        try:
            url = namespaced_url(self.url, namespace)
        except NamespacesNotSupported:
            return store_from_url(with_query(self.url, namespace=namespace), options)
        if url not in self._dropped_by_us:
            self._dropped_by_us.append(url)
        return store_from_url(url, options)

    async def aclose(self) -> None:
        for url in self._dropped_by_us:
            await drop_namespace(url)


def module_factory(spec: str) -> Any:
    """The object `module:attr` names (the user's own factory)."""
    module_name, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module_name), attr)
