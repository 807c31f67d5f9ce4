"""A store URL read once: :class:`StoreLocation`, the typed value the code carries.

The core reads what every store URL shares (its scheme, ``?timeout_ms=``, the password to
mask); a backend's :meth:`~mcp_tasks.stores.opening.StoreBackend.locate` reads the rest
(its namespace, its own parameters) into the same value, or a subclass of its own with
typed fields. Nothing after that splits the URL again: a store is named to people by
:attr:`StoreLocation.masked`, its backend by :attr:`StoreLocation.scheme`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from mcp_tasks.domain.models import StoreOptions

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["TIMEOUT_PARAM", "StoreLocation", "mask_password", "query_value", "with_query"]

#: The store URL query parameter that sets ``StoreOptions.timeout_ms`` (on every store).
TIMEOUT_PARAM: Final = "timeout_ms"

L = TypeVar("L", bound="StoreLocation")


@dataclass(frozen=True, kw_only=True, repr=False)
class StoreLocation:
    """Where a store is: its URL, read once.

    ``url`` is the URL as written (password included: it is what a backend connects
    with; never show it, show :attr:`masked`). ``query`` holds its query parameters but
    the ones the core reads (``?timeout_ms=``, kept in ``timeout_ms``); ``namespace`` is
    the part of the backend the URL points at (a schema, a key prefix, a table prefix, a
    memory store's name), set by the backend's ``locate``; ``password`` is the URL's own
    (what an error message must never repeat). ``masked`` is how people see the store:
    the URL that opens the same namespace again, password replaced by ``***`` (by
    default the URL as written, masked; a backend's ``locate`` may spell it out, with
    its defaults and an absolute path).
    """

    url: str
    scheme: str
    query: Mapping[str, str] = field(default_factory=dict)
    timeout_ms: int | None = None
    namespace: str | None = None
    password: str | None = field(default=None, compare=False)
    masked: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.masked:
            object.__setattr__(self, "masked", mask_password(self.url))

    @classmethod
    def read(cls, url: str) -> StoreLocation:
        """What every store URL shares, read from ``url``.

        Raises:
            ValueError: no ``scheme://``, or ``?timeout_ms=`` is not a positive whole
                number of milliseconds.
        """
        parts = urlsplit(url)
        if not parts.scheme or "://" not in url:
            raise ValueError("a store URL needs a scheme, e.g. memory:// or sqlite:///tasks.db")
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        text = query.pop(TIMEOUT_PARAM, None)
        timeout_ms = None
        if text is not None:
            if not (text.isascii() and text.isdigit()) or int(text) == 0:
                raise ValueError(f"?{TIMEOUT_PARAM}= is a positive whole number of milliseconds")
            timeout_ms = int(text)
        return StoreLocation(
            url=url,
            scheme=parts.scheme.lower(),
            query=query,
            timeout_ms=timeout_ms,
            password=parts.password,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.masked!r})"

    def value(self, key: str) -> str | None:
        """The value of the backend's query parameter ``key`` (the last one), if any."""
        return self.query.get(key)

    def stripped(self, *keys: str) -> str:
        """The URL without ``?timeout_ms=`` and the parameters ``keys``: what a backend
        hands its driver, which would take any parameter it does not know as a setting."""
        return with_query(self.url, **dict.fromkeys((TIMEOUT_PARAM, *keys)))

    def options(self, given: StoreOptions | None = None) -> StoreOptions:
        """``given`` (default ``StoreOptions()``) with what the URL sets: the URL, being
        what the operator wrote, wins."""
        options = given or StoreOptions()
        if self.timeout_ms is None:
            return options
        return dataclasses.replace(options, timeout_ms=self.timeout_ms)

    def specialised(self, kind: type[L], **fields: Any) -> L:
        """This location as ``kind`` (a backend's subclass), with its own ``fields``."""
        shared = {f.name: getattr(self, f.name) for f in dataclasses.fields(StoreLocation)}
        return kind(**{**shared, **fields})


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
