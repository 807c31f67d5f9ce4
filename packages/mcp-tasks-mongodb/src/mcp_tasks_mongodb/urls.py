"""The MongoDB store's URLs and names: ``mongodb://[user:password@]host:27017/database?prefix=NAME``
(or ``mongodb+srv://``); the database and the collection prefix are the namespace."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from mcp_tasks.stores.kit import TIMEOUT_PARAM
from mcp_tasks.stores.opening import query_value, with_query

__all__ = ["DEFAULT_DATABASE", "DEFAULT_PREFIX", "SCHEMES", "check_names", "parse"]

DEFAULT_DATABASE = "mcp_tasks"
DEFAULT_PREFIX = "mcp_tasks"
SCHEMES = ("mongodb", "mongodb+srv")
_PREFIX = re.compile(r"[A-Za-z0-9_-]{1,64}")
_DATABASE = re.compile(r"[A-Za-z0-9_-]{1,63}")


def parse(url: str) -> tuple[str, str, str]:
    """The URL PyMongo connects to (without ``prefix``), the database and the prefix.

    Raises:
        ValueError: not a MongoDB store URL, or a name it may not have.
    """
    parts = urlsplit(url)
    if parts.scheme.lower() not in SCHEMES:
        raise ValueError(
            "A MongoDB store URL looks like mongodb://[user:password@]host:27017/database?prefix=NAME"
        )
    database = unquote(parts.path.lstrip("/")) or DEFAULT_DATABASE
    if not _DATABASE.fullmatch(database):
        raise ValueError("A MongoDB store's database name is letters, digits, '_' or '-'")
    prefix = query_value(url, "prefix") or DEFAULT_PREFIX
    if not _PREFIX.fullmatch(prefix):
        raise ValueError("A MongoDB store's ?prefix= is letters, digits, '_' or '-'")
    return with_query(url, prefix=None, **{TIMEOUT_PARAM: None}), database, prefix


def check_names(url: str, database: str, prefix: str) -> None:
    """What a store opened by its parts checks: a MongoDB URL, a database name and a
    collection prefix it may have.

    Raises:
        ValueError: one of them is not.
    """
    if not _PREFIX.fullmatch(prefix):
        raise ValueError("prefix must be 1-64 letters, digits, '_' or '-'")
    if not _DATABASE.fullmatch(database):
        raise ValueError("the database name must be 1-63 letters, digits, '_' or '-'")
    if urlsplit(url).scheme.lower() not in SCHEMES:
        raise ValueError("A MongoDB store URL looks like mongodb://host:27017/database")
