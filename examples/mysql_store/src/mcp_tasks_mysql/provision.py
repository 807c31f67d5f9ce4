"""Where this store's tests find a server
(:class:`~mcp_tasks.stores.provisioning.ProvisionsTestStores`): ``MCP_TASKS_TEST_MYSQL_URL``,
which must accept a connection; no server is started here. Each test uses a table prefix of
its own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import pymysql

from mcp_tasks.stores.provisioning import first_test_server, server_url_env

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

MYSQL_URL_ENV = server_url_env("mysql")


def connect(url: str) -> pymysql.Connection[Any]:
    """A plain connection to the database ``url`` names (for a test's own SQL)."""
    parts = urlsplit(url)
    return pymysql.connect(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 3306,
        user=unquote(parts.username or "root"),
        password=unquote(parts.password or ""),
        database=unquote(parts.path.lstrip("/")),
        connect_timeout=5,
        autocommit=True,
    )


def _answers(url: str) -> str | None:
    """Why the server at ``url`` refuses a connection, or ``None`` when it accepts one."""
    try:
        connect(url).close()
    except pymysql.err.MySQLError as error:
        return str(error)
    return None


class MySQLTestServers:
    """The MariaDB / MySQL backend's test server: the environment's."""

    def test_server(self) -> AbstractContextManager[str]:
        return first_test_server(
            "MySQL",
            MYSQL_URL_ENV,
            _answers,
            [],
            f"set {MYSQL_URL_ENV}=mysql://user:password@host:3306/database",
        )

    def test_store_url(self, server_url: str, /) -> str:
        return server_url
