"""The MariaDB / MySQL server the tests use: ``MCP_TASKS_TEST_MYSQL_URL``
(``mysql://root@127.0.0.1:3306/test`` on the project's machines). Without one the tests
skip, and fail when ``CI`` is set."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote, urlsplit

import pymysql
import pytest

from mcp_tasks_contract.servers import unavailable

MYSQL_URL_ENV = "MCP_TASKS_TEST_MYSQL_URL"


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


@pytest.fixture(scope="session")
def mysql_url() -> str:
    """The server's URL, once it answered a connection."""
    url = os.environ.get(MYSQL_URL_ENV)
    if not url:
        unavailable("MySQL", f"set {MYSQL_URL_ENV}=mysql://user:password@host:3306/database")
    try:
        connect(url).close()
    except pymysql.err.MySQLError as error:
        unavailable("MySQL", f"{MYSQL_URL_ENV} does not answer ({error})")
    return url


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
