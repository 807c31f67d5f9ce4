"""The contract's ``store`` factory for a store URL: one namespace of the backend per call."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import urlsplit

from mcp_tasks import drop_namespace, namespaced_url, store_from_url
from mcp_tasks.runtime.notifier import OffersNotifier
from mcp_tasks.stores.abilities import CountsReader, Rewrites
from mcp_tasks.stores.opening import NamespacesNotSupported, with_query
from mcp_tasks_contract.offers import Offers

if TYPE_CHECKING:
    from types import TracebackType

    from mcp_tasks import Store, StoreOptions

S = TypeVar("S", bound="Store")


class UrlStoreFactory:
    """An async ``(namespace, options) -> Store`` factory (the ``store`` fixture's) over
    one store URL; closes every handle it opened and drops every namespace it used.

    Each namespace is the backend's own, from :func:`mcp_tasks.namespaced_url` (a memory
    name, a SQLite table prefix, a Postgres schema, a Redis or MongoDB key prefix); every
    other part of the URL is kept, so ``?max_connections=1`` applies to every handle. A
    ``sqlite://`` URL without a path uses ``contract.db`` in ``scratch``. A store without
    namespaces gets a ``?namespace=`` query parameter, which a third-party store may
    honour (it then drops nothing). Use it as ``async with UrlStoreFactory(url) as
    stores: yield stores``, or call :meth:`aclose` at teardown.
    """

    def __init__(self, url: str, scratch: str | Path | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme.lower() == "sqlite" and len(parts.path) < 2:
            if scratch is None:
                raise ValueError("A sqlite:// URL without a path needs a scratch folder")
            url = f"sqlite:///{Path(scratch) / 'contract.db'}"
        self.url = url
        self._namespaces: list[str] = []
        self._opened: list[Store] = []

    async def __call__(self, namespace: str, options: StoreOptions) -> Store:
        """A new handle on ``namespace``, opened by :func:`mcp_tasks.store_from_url`."""
        try:
            url = self.namespace_url(namespace)
        except NamespacesNotSupported:
            url = with_query(self.url, namespace=namespace)
        return self.keep(store_from_url(url, options))

    def namespace_url(self, namespace: str) -> str:
        """The URL of ``namespace`` (dropped at :meth:`aclose`), for a handle opened some
        other way (a constructor with arguments a URL does not carry): pass it to
        :meth:`keep`.

        Raises:
            NamespacesNotSupported: the backend has no namespaces.
        """
        url = namespaced_url(self.url, namespace)
        if url not in self._namespaces:
            self._namespaces.append(url)
        return url

    def keep(self, handle: S) -> S:
        """``handle``, closed at :meth:`aclose` (``close`` is idempotent: its user may close
        it first)."""
        self._opened.append(handle)
        return handle

    async def aclose(self) -> None:
        """Close every handle, then drop every namespace, this factory opened."""
        opened, self._opened = self._opened, []
        for handle in opened:
            await handle.close()
        namespaces, self._namespaces = self._namespaces, []
        for url in namespaces:
            await drop_namespace(url)

    async def __aenter__(self) -> UrlStoreFactory:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


def offers_of_url(url: str) -> Offers:
    """What the backend registered for ``url``'s scheme offers: namespaces when
    :func:`mcp_tasks.namespaced_url` can point the URL at one, a notifier when its store
    offers one (:class:`~mcp_tasks.runtime.notifier.OffersNotifier`), rewrites when it
    rewrites (:class:`~mcp_tasks.stores.abilities.Rewrites`), counts when it keeps counts
    (:class:`~mcp_tasks.stores.abilities.CountsReader`). A store opened by
    URL keeps the real clock, and its server's restarts are the backend's own tests'."""
    try:
        namespaced_url(url, "mcpt_probe")
    except NamespacesNotSupported:
        namespaces = False
    else:
        namespaces = True
    # Opening does no I/O (StoreBackend.open): the handle holds nothing to close.
    opened = store_from_url(url)
    notifier = isinstance(opened, OffersNotifier)
    return Offers(
        namespaces=namespaces,
        notifier=notifier,
        rewrite=isinstance(opened, Rewrites),
        counts=isinstance(opened, CountsReader),
    )
