"""The MongoDB store's URLs and names: ``mongodb://[user:password@]host:27017/database?prefix=NAME``
(or ``mongodb+srv://``); the database and the collection prefix are the namespace."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from mcp_tasks.stores.location import StoreLocation, mask_password, with_query

__all__ = [
    "DEFAULT_DATABASE",
    "DEFAULT_PREFIX",
    "SCHEMES",
    "MongoLocation",
    "check_names",
    "locate",
    "shown",
]

DEFAULT_DATABASE = "mcp_tasks"
DEFAULT_PREFIX = "mcp_tasks"
SCHEMES = ("mongodb", "mongodb+srv")
_PREFIX = re.compile(r"[A-Za-z0-9_-]{1,64}")
_DATABASE = re.compile(r"[A-Za-z0-9_-]{1,63}")


@dataclass(frozen=True, kw_only=True, repr=False)
class MongoLocation(StoreLocation):
    """A ``mongodb://`` URL read: what PyMongo connects to, the database and the
    collection prefix (together the namespace)."""

    connect_url: str
    database: str
    prefix: str


def locate(url: str) -> MongoLocation:
    """``url`` read: what PyMongo connects to (without ``prefix``), the database and the
    prefix.

    Raises:
        ValueError: not a MongoDB store URL, or a name it may not have.
    """
    location = StoreLocation.read(url)
    if location.scheme not in SCHEMES:
        raise ValueError(
            "A MongoDB store URL looks like mongodb://[user:password@]host:27017/database?prefix=NAME"
        )
    database = unquote(urlsplit(url).path.lstrip("/")) or DEFAULT_DATABASE
    if not _DATABASE.fullmatch(database):
        raise ValueError("A MongoDB store's database name is letters, digits, '_' or '-'")
    prefix = location.value("prefix") or DEFAULT_PREFIX
    if not _PREFIX.fullmatch(prefix):
        raise ValueError("A MongoDB store's ?prefix= is letters, digits, '_' or '-'")
    connect_url = location.stripped("prefix")
    return location.specialised(
        MongoLocation,
        namespace=f"{database}.{prefix}",
        masked=shown(connect_url, database, prefix),
        connect_url=connect_url,
        database=database,
        prefix=prefix,
    )


def shown(connect_url: str, database: str, prefix: str) -> str:
    """The URL that opens the namespace ``database``/``prefix`` again, password masked."""
    url = urlsplit(connect_url)._replace(path=f"/{database}").geturl()
    return mask_password(with_query(url, prefix=prefix))


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
