"""The MariaDB / MySQL Store and how a ``mysql://`` or ``mariadb://`` URL opens it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from mcp_tasks.stores.location import StoreLocation, with_query
from mcp_tasks_mysql.dialect import MySQLDialect
from mcp_tasks_mysql.provision import MySQLTestServers
from mcp_tasks_sql import SQLTaskStore

if TYPE_CHECKING:
    from mcp_tasks.domain.models import StoreOptions

SCHEMES = ("mysql", "mariadb")
PREFIX_PARAM = "table_prefix"
DEFAULT_PORT = 3306
#: A table prefix MySQL takes unquoted, short enough for the longest name built on it.
_PREFIX = re.compile(r"[a-z0-9_]{0,40}")


class MySQLTaskStore(SQLTaskStore):
    """A :class:`~mcp_tasks.Store` in one MariaDB (10.6 or later) or MySQL 8 database;
    ``table_prefix`` is its namespace. The server's clock keeps the time. It offers no
    cross-process notifier: other processes see a change within their poll fallback."""

    dialect: MySQLDialect

    def __init__(self, where: str | MySQLLocation, options: StoreOptions | None = None) -> None:
        location = where if isinstance(where, MySQLLocation) else locate(where)
        super().__init__(dialect_at(location), location.options(options), location=location)

    @property
    def table_prefix(self) -> str:
        return self.dialect.table_prefix


@dataclass(frozen=True, kw_only=True, repr=False)
class MySQLLocation(StoreLocation):
    """A ``mysql://`` URL read: the server, the database and the table prefix (the
    namespace)."""

    host: str
    port: int
    user: str
    password: str
    database: str
    table_prefix: str
    max_connections: int


def locate(url: str) -> MySQLLocation:
    """``url`` read: ``mysql://user:password@host:port/database``, with ``?table_prefix=``
    (the namespace, default none) and ``?max_connections=`` (default 10).

    Raises:
        ValueError: not a MySQL store URL, or a value it may not have.
    """
    location = StoreLocation.read(url)
    parts = urlsplit(url)
    if location.scheme not in SCHEMES:
        raise ValueError("A MySQL store URL looks like mysql://user@host:3306/database")
    database = unquote(parts.path.lstrip("/"))
    if not database or "/" in database:
        raise ValueError("A MySQL store URL names its database: mysql://user@host/database")
    prefix = location.value(PREFIX_PARAM) or ""
    if not _PREFIX.fullmatch(prefix):
        raise ValueError("A MySQL store's ?table_prefix= is at most 40 of a-z, 0-9 and _")
    connections = location.value("max_connections") or "10"
    if not (connections.isascii() and connections.isdigit() and int(connections) >= 1):
        raise ValueError("A MySQL store's ?max_connections= is a whole number, at least 1")
    return location.specialised(
        MySQLLocation,
        namespace=prefix,
        host=parts.hostname or "127.0.0.1",
        port=parts.port or DEFAULT_PORT,
        user=unquote(parts.username or "root"),
        password=unquote(parts.password or ""),
        database=database,
        table_prefix=prefix,
        max_connections=int(connections),
    )


def dialect_at(location: MySQLLocation, *, max_connections: int | None = None) -> MySQLDialect:
    """The dialect on ``location`` (``max_connections`` overrides the URL's)."""
    return MySQLDialect(
        host=location.host,
        port=location.port,
        user=location.user,
        password=location.password,
        database=location.database,
        table_prefix=location.table_prefix,
        max_connections=max_connections or location.max_connections,
        url=location.masked,
    )


class MySQLStoreBackend(MySQLTestServers):
    """The ``mcp_tasks.stores`` entry point: reads a URL, opens a store there, points at
    and drops a namespace, and says where tests find a server
    (:mod:`mcp_tasks_mysql.provision`)."""

    def locate(self, url: str, /) -> MySQLLocation:
        return locate(url)

    def open(self, location: MySQLLocation, options: StoreOptions, /) -> MySQLTaskStore:
        return MySQLTaskStore(location, options)

    def namespaced(self, location: MySQLLocation, namespace: str, /) -> MySQLLocation:
        return locate(with_query(location.url, **{PREFIX_PARAM: f"{namespace.lower()}_"}))

    async def drop(self, location: MySQLLocation, /) -> None:
        dialect = dialect_at(location, max_connections=1)
        try:
            await dialect.drop()
        finally:
            await dialect.close()


#: The ``mysql`` and ``mariadb`` entry points of the ``mcp_tasks.stores`` group.
backend = MySQLStoreBackend()
