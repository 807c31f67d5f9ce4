"""The MariaDB / MySQL Store and how a ``mysql://`` or ``mariadb://`` URL opens it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from mcp_tasks.stores.opening import mask_password, query_value, with_query
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

    def __init__(self, url: str, options: StoreOptions | None = None) -> None:
        super().__init__(dialect_for(url), options)

    @property
    def table_prefix(self) -> str:
        return self.dialect.table_prefix


def dialect_for(url: str) -> MySQLDialect:
    """The dialect ``url`` names: ``mysql://user:password@host:port/database``, with
    ``?table_prefix=`` (the namespace, default none) and ``?max_connections=`` (default 10)."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in SCHEMES:
        raise ValueError("A MySQL store URL looks like mysql://user@host:3306/database")
    database = unquote(parts.path.lstrip("/"))
    if not database or "/" in database:
        raise ValueError("A MySQL store URL names its database: mysql://user@host/database")
    prefix = query_value(url, PREFIX_PARAM) or ""
    if not _PREFIX.fullmatch(prefix):
        raise ValueError("A MySQL store's ?table_prefix= is at most 40 of a-z, 0-9 and _")
    connections = query_value(url, "max_connections") or "10"
    if not (connections.isascii() and connections.isdigit() and int(connections) >= 1):
        raise ValueError("A MySQL store's ?max_connections= is a whole number, at least 1")
    return MySQLDialect(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or DEFAULT_PORT,
        user=unquote(parts.username or "root"),
        password=unquote(parts.password or ""),
        database=database,
        table_prefix=prefix,
        max_connections=int(connections),
        url=mask_password(url),
    )


class MySQLStoreBackend(MySQLTestServers):
    """The ``mcp_tasks.stores`` entry point: opens, points at and drops a namespace, and
    says where tests find a server (:mod:`mcp_tasks_mysql.provision`)."""

    def open(self, url: str, options: StoreOptions | None = None, /) -> MySQLTaskStore:
        return MySQLTaskStore(url, options)

    def namespaced(self, url: str, namespace: str, /) -> str:
        dialect_for(url)  # a bad URL fails here, not in the test that uses it
        return with_query(url, **{PREFIX_PARAM: f"{namespace.lower()}_"})

    async def drop(self, url: str, /) -> None:
        dialect = dialect_for(with_query(url, max_connections="1"))
        try:
            await dialect.drop()
        finally:
            await dialect.close()


#: The ``mysql`` and ``mariadb`` entry points of the ``mcp_tasks.stores`` group.
backend = MySQLStoreBackend()
