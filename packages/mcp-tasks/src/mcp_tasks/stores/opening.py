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
from typing import TYPE_CHECKING, Protocol, runtime_checkable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from mcp_tasks.domain.errors import MCPTasksError

if TYPE_CHECKING:
    from mcp_tasks.domain.models import StoreOptions
    from mcp_tasks.stores.protocol import Store

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
class StoreBackend(Protocol):
    """What a ``mcp_tasks.stores`` entry point names: how one kind of store is opened.

    ``namespaced`` and ``drop`` are what tests and ``mcp-tasks contract`` need; a backend
    without namespaces may raise :class:`NamespacesNotSupported` from both.
    """

    def open(self, url: str, options: StoreOptions | None = None, /) -> Store:
        """The store ``url`` names. Connects lazily: opening never does I/O."""
        ...

    def namespaced(self, url: str, namespace: str, /) -> str:
        """``url`` pointed at ``namespace`` (letters, digits and ``_``) of the same backend."""
        ...

    async def drop(self, url: str, /) -> None:
        """Delete the namespace ``url`` names with every task in it; a missing one is fine."""
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
    """A :class:`StoreBackend` around a plain factory entry point."""

    def __init__(self, factory: StoreFactory) -> None:
        self._factory = factory

    def open(self, url: str, options: StoreOptions | None = None, /) -> Store:
        return self._factory(url, options)

    def namespaced(self, url: str, namespace: str, /) -> str:
        raise NamespacesNotSupported

    async def drop(self, url: str, /) -> None:
        raise NamespacesNotSupported


def backend_for(url: str) -> StoreBackend:
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

    Raises:
        UnknownStoreScheme: no URL, or no installed backend for its scheme.
        InvalidStoreURL: the backend cannot read the URL (a ``ValueError``; the message
            names the URL, password masked, and the backend's expected form).
    """
    url = url or os.environ.get(URL_ENV)
    if not url:
        raise UnknownStoreScheme(f"No store URL given and {URL_ENV} is not set")
    backend = backend_for(url)
    try:
        return backend.open(url, options)
    except InvalidStoreURL:
        raise
    except ValueError as error:
        raise InvalidStoreURL(f"{mask_password(url)}: {error}") from error


def namespaced_url(url: str, namespace: str) -> str:
    """``url`` pointed at ``namespace`` of the same backend (see :class:`StoreBackend`).

    Raises:
        ValueError: ``namespace`` is not letters, digits and ``_``.
        UnknownStoreScheme: no installed backend for the URL's scheme.
        NamespacesNotSupported: the backend has no namespaces.
        InvalidStoreURL: the backend cannot read the URL (as :func:`store_from_url` says).
    """
    if not namespace or not all(c.isascii() and (c.isalnum() or c == "_") for c in namespace):
        raise ValueError("A namespace is letters, digits and '_'")
    backend = backend_for(url)
    try:
        return backend.namespaced(url, namespace)
    except (InvalidStoreURL, NamespacesNotSupported):
        raise
    except ValueError as error:
        raise InvalidStoreURL(f"{mask_password(url)}: {error}") from error


async def drop_namespace(url: str) -> None:
    """Delete the namespace ``url`` names, with every task in it."""
    await backend_for(url).drop(url)


def describe_store(store: Store) -> str:
    """How to name ``store`` to a person: its URL (password masked) when it has one."""
    url = getattr(store, "url", None)
    return mask_password(url) if isinstance(url, str) else repr(store)


def mask_password(url: str) -> str:
    """The URL with its password (if any) replaced by ``***``: safe for logs and banners."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def with_query(url: str, **values: str | None) -> str:
    """``url`` with query parameters set (``None`` removes one); for backends' URLs."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in values]
    query += [(k, v) for k, v in values.items() if v is not None]
    # Not urlunsplit: it turns sqlite:///tasks.db (an empty host) into sqlite:/tasks.db.
    text = f"{parts.scheme}://{parts.netloc}{parts.path}"
    if query:
        text += "?" + urlencode(query)
    return text + (f"#{parts.fragment}" if parts.fragment else "")


def query_value(url: str, key: str) -> str | None:
    """The last value of query parameter ``key`` in ``url``, if any."""
    found = None
    for k, v in parse_qsl(urlsplit(url).query, keep_blank_values=True):
        if k == key:
            found = v
    return found
