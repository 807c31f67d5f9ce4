"""The one owner of opening a Store: by URL, through the ``mcp_tasks.stores`` entry points.

A URL names a backend (its scheme) and a namespace in it: a SQLite file and table prefix, a
Postgres schema, a named in-memory store. Each backend registers a :class:`StoreBackend`
under its schemes; :func:`store_from_url` opens a store, :func:`namespaced_url` points a URL
at another namespace of the same backend, and :func:`drop_namespace` removes a namespace
with every task in it (what tests use to clean up).
"""

from __future__ import annotations

import difflib
import os
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable
from urllib.parse import urlsplit

from mcp_tasks.domain.errors import MCPTasksError
from mcp_tasks.stores.abilities import Located
from mcp_tasks.stores.location import StoreLocation, mask_password, query_value, with_query
from mcp_tasks.stores.observed import unobserved

if TYPE_CHECKING:
    from mcp_tasks.domain.models import StoreOptions
    from mcp_tasks.stores.protocol import Store

__all__ = [
    "ENTRY_POINT_GROUP",
    "URL_ENV",
    "InvalidStoreURL",
    "Namespaced",
    "NamespacesNotSupported",
    "StoreBackend",
    "StoreFactory",
    "StoreLocation",
    "StoreNotInstalled",
    "UnknownStoreScheme",
    "backend_for",
    "closest_scheme",
    "describe_store",
    "drop_namespace",
    "installed_schemes",
    "locate",
    "mask_password",
    "namespaced_url",
    "query_value",
    "store_from_url",
    "with_query",
]

#: A backend's own kind of :class:`StoreLocation`.
L = TypeVar("L", bound=StoreLocation)

ENTRY_POINT_GROUP = "mcp_tasks.stores"
URL_ENV = "MCP_TASKS_STORE_URL"

# Schemes of the in-repo backends → the extra that brings each one (only extras that exist).
KNOWN_EXTRAS: dict[str, str] = {
    "sqlite": "sqlite",
    "postgresql": "postgres",
    "postgres": "postgres",
    "redis": "redis",
    "rediss": "redis",
    "redis+unix": "redis",
    "mongodb": "mongodb",
    "mongodb+srv": "mongodb",
}


@runtime_checkable
class StoreBackend(Protocol[L]):
    """What a ``mcp_tasks.stores`` entry point names: one kind of store, described once.

    ``locate`` reads a URL of the backend's schemes once, into a :class:`StoreLocation`
    (or a subclass of its own with typed fields) that the rest of the code carries;
    ``open`` opens the store there. What a store offers beyond the ten operations (stats,
    migrate, diagnose, a cross-process notifier) the store says itself, as typed
    abilities (:mod:`mcp_tasks.stores.abilities`). A backend with namespaces is also a
    :class:`Namespaced` one (what tests and ``mcp-tasks contract`` need).
    """

    def locate(self, url: str, /) -> L:
        """``url`` read: start from :meth:`StoreLocation.read`, then the backend's own
        parts (its namespace, its parameters).

        Raises:
            ValueError: the URL is not one this backend can read (the message says the
                form it expects).
        """
        ...

    def open(self, location: L, options: StoreOptions, /) -> Store:
        """The store at ``location``, with ``options`` (what the URL sets included).
        Connects lazily: opening never does I/O."""
        ...


@runtime_checkable
class Namespaced(Protocol[L]):
    """A backend whose URLs name a namespace (a schema, a key prefix, a table prefix)."""

    def namespaced(self, location: L, namespace: str, /) -> L:
        """``location`` pointed at ``namespace`` (letters, digits and ``_``)."""
        ...

    async def drop(self, location: L, /) -> None:
        """Delete the namespace ``location`` names with every task in it; a missing one
        is fine."""
        ...


class StoreFactory(Protocol):
    """The plain entry point: a callable URL (+ options) → Store, for a store with no
    namespaces to point at or drop."""

    def __call__(self, url: str, options: StoreOptions | None = None, /) -> Store: ...


class UnknownStoreScheme(MCPTasksError, ValueError):
    """No installed Store handles this URL scheme."""


class StoreNotInstalled(UnknownStoreScheme):
    """The URL names one of mcp-tasks' own stores, whose distribution is not installed.

    The message gives both install routes: from the package index, and from a clone of the
    repository (the route while the distributions are unpublished).
    """

    def __init__(self, scheme: str, extra: str) -> None:
        self.scheme = scheme
        self.extra = extra
        self.from_index = f'pip install "mcp-tasks[{extra}]"'
        self.from_clone = (
            f'pip install "./packages/mcp-tasks[{extra}]" ./packages/mcp-tasks-* '
            '(in a clone; README "Installing from a clone")'
        )
        super().__init__(
            f"The {scheme}:// store is not installed; from a clone: {self.from_clone}; "
            f"from the package index: {self.from_index}"
        )


class InvalidStoreURL(MCPTasksError, ValueError):
    """The store URL is not one its backend can read."""


class NamespacesNotSupported(MCPTasksError):
    """This store backend cannot point at or drop a namespace."""


class _FactoryBackend:
    """A :class:`StoreBackend` around a plain factory entry point: it reads only what
    every URL shares, and hands the factory the URL as written."""

    def __init__(self, factory: StoreFactory) -> None:
        self._factory = factory

    def locate(self, url: str, /) -> StoreLocation:
        return StoreLocation.read(url)

    def open(self, location: StoreLocation, options: StoreOptions, /) -> Store:
        return self._factory(location.url, options)


def backend_for(url: str) -> StoreBackend[Any]:
    """The installed backend for ``url``'s scheme.

    Raises:
        StoreNotInstalled: the scheme is one of mcp-tasks' own stores, not installed.
        UnknownStoreScheme: no installed package registers the scheme; a scheme close to
            an installed one (a typo, a SQLAlchemy ``+driver`` suffix) gets the URL it
            probably meant and the installed schemes.
    """
    scheme = urlsplit(url).scheme.lower()
    if not scheme or "://" not in url:
        raise UnknownStoreScheme(
            f"{mask_password(url)!r} is not a store URL: a store URL needs a scheme, "
            "e.g. memory:// or sqlite:///tasks.db"
        )
    for entry in entry_points(group=ENTRY_POINT_GROUP, name=scheme):
        loaded: object = entry.load()
        if isinstance(loaded, StoreBackend):
            return loaded
        if callable(loaded):
            return _FactoryBackend(loaded)
        raise UnknownStoreScheme(f"The {scheme}:// entry point is not a store backend")
    extra = KNOWN_EXTRAS.get(scheme)
    if extra is not None:
        raise StoreNotInstalled(scheme, extra)
    installed = installed_schemes()
    meant = closest_scheme(scheme, installed) or closest_scheme(scheme, list(KNOWN_EXTRAS))
    if meant is not None:
        fixed = meant + url[len(scheme) :]
        known = ", ".join(f"{name}://" for name in installed) or "none"
        raise UnknownStoreScheme(
            f"No store is registered for {scheme}://; did you mean {mask_password(fixed)}? "
            f"(installed: {known})"
        )
    raise UnknownStoreScheme(
        f"No store is registered for {scheme}://; a third-party store registers its scheme "
        f"in the {ENTRY_POINT_GROUP!r} entry-point group"
    )


def installed_schemes() -> list[str]:
    """The schemes installed packages register in the ``mcp_tasks.stores`` group, sorted."""
    return sorted({entry.name.lower() for entry in entry_points(group=ENTRY_POINT_GROUP)})


def closest_scheme(scheme: str, candidates: list[str]) -> str | None:
    """The candidate ``scheme`` most probably meant: its part before ``+`` (a SQLAlchemy
    driver suffix, ``postgres+asyncpg``), else the closest spelling, if any is close."""
    base = scheme.split("+", 1)[0]
    if base != scheme and base in candidates:
        return base
    close = difflib.get_close_matches(scheme, candidates, n=1, cutoff=0.75)
    return close[0] if close else None


def store_from_url(url: str | None = None, options: StoreOptions | None = None) -> Store:
    """The Store for ``url`` (or ``$MCP_TASKS_STORE_URL``), e.g. ``sqlite:///tasks.db``.

    The URL is read once, by its backend (:meth:`StoreBackend.locate`); the store keeps
    that :class:`StoreLocation`.

    Raises:
        UnknownStoreScheme: no URL, or no installed backend for its scheme.
        InvalidStoreURL: the backend cannot read the URL (a ``ValueError``; the message
            names the URL, password masked, and the backend's expected form).
    """
    url = url or os.environ.get(URL_ENV)
    if not url:
        raise UnknownStoreScheme(f"No store URL given and {URL_ENV} is not set")
    backend, location = _located(url)
    try:
        return backend.open(location, location.options(options))
    except InvalidStoreURL:
        raise
    except ValueError as error:
        raise InvalidStoreURL(f"{location.masked}: {error}") from error


def locate(url: str) -> StoreLocation:
    """``url`` read by its backend (as :func:`store_from_url` reads it), without opening
    a store.

    Raises:
        UnknownStoreScheme, InvalidStoreURL: as :func:`store_from_url` says.
    """
    return _located(url)[1]


def _located(url: str) -> tuple[StoreBackend[Any], StoreLocation]:
    backend = backend_for(url)
    try:
        return backend, backend.locate(url)
    except InvalidStoreURL:
        raise
    except ValueError as error:
        raise InvalidStoreURL(f"{mask_password(url)}: {error}") from error


def namespaced_url(url: str, namespace: str) -> str:
    """``url`` pointed at ``namespace`` of the same backend (see :class:`Namespaced`).

    Raises:
        ValueError: ``namespace`` is not letters, digits and ``_``.
        UnknownStoreScheme: no installed backend for the URL's scheme.
        NamespacesNotSupported: the backend has no namespaces.
        InvalidStoreURL: the backend cannot read the URL (as :func:`store_from_url` says).
    """
    if not namespace or not all(c.isascii() and (c.isalnum() or c == "_") for c in namespace):
        raise ValueError("A namespace is letters, digits and '_'")
    backend, location = _located(url)
    if not isinstance(backend, Namespaced):
        raise NamespacesNotSupported
    try:
        pointed: StoreLocation = backend.namespaced(location, namespace)
        return pointed.url
    except ValueError as error:
        raise InvalidStoreURL(f"{location.masked}: {error}") from error


async def drop_namespace(url: str) -> None:
    """Delete the namespace ``url`` names, with every task in it.

    Raises:
        NamespacesNotSupported: the backend has no namespaces.
    """
    backend, location = _located(url)
    if not isinstance(backend, Namespaced):
        raise NamespacesNotSupported
    await backend.drop(location)


def describe_store(store: Store) -> str:
    """How to name ``store`` to a person: where it is (password masked) when it was
    opened from a URL, else its repr."""
    store = unobserved(store)
    return store.location.masked if isinstance(store, Located) else repr(store)
