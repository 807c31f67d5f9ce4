"""The SQLite store's test servers (:class:`~mcp_tasks.stores.provisioning.ProvisionsTestStores`):
``MCP_TASKS_TEST_SQLITE_URL`` when set, else a database file in a temporary directory,
deleted at the end of the session. Each test uses a table prefix of its own."""

from __future__ import annotations

import tempfile
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from mcp_tasks.stores.provisioning import first_test_server, server_url_env

if TYPE_CHECKING:
    from collections.abc import Iterator

SQLITE_URL_ENV = server_url_env("sqlite")


@contextmanager
def _scratch_file() -> Iterator[str | None]:
    with tempfile.TemporaryDirectory(prefix="mcp-tasks-sqlite-") as directory:
        yield f"sqlite:///{Path(directory) / 'tasks.db'}"


class SQLiteTestServers:
    """The SQLite backend's test "server": a file of its own."""

    def test_server(self) -> AbstractContextManager[str]:
        return first_test_server("SQLite", SQLITE_URL_ENV, None, [_scratch_file], "")

    def test_store_url(self, server_url: str, /) -> str:
        return server_url
