"""The Postgres store on a real server: URLs, schema, server clock, races, errors, index plans."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

import anyio
import asyncpg
import pytest

from mcp_tasks import (
    ANY_OWNER,
    Complete,
    DuplicateTaskId,
    NewTask,
    Progress,
    StaleLease,
    StoreOptions,
    StoreUnavailable,
    TaskLimitReached,
    TaskNotFound,
    WorkSpec,
    new_task_id,
    store_from_url,
)
from mcp_tasks_postgres import PostgresTaskStore

if TYPE_CHECKING:
    from conftest import OpenStore

pytestmark = pytest.mark.anyio


async def wait_past(url: str, epoch_ms: int) -> None:
    """Wait until the server's clock (the store clock) is past ``epoch_ms``: expiry is then
    certain, however long the test's own steps took (10 s failure timeout)."""
    conn = await asyncpg.connect(url)
    try:
        with anyio.fail_after(10):
            while True:
                now = await conn.fetchval(
                    "SELECT floor(extract(epoch from clock_timestamp()) * 1000)::bigint"
                )
                if now > epoch_ms:
                    return
                await anyio.sleep((epoch_ms - now + 1) / 1000)
    finally:
        await conn.close()


async def test_store_from_url_finds_the_postgres_store(postgres_url: str, namespace: str) -> None:
    """postgresql:// and postgres:// resolve through the entry points; ?schema= is the namespace."""
    sep = "&" if "?" in postgres_url else "?"
    for url in (postgres_url, postgres_url.replace("postgresql://", "postgres://", 1)):
        store = store_from_url(f"{url}{sep}schema={namespace}")
        assert isinstance(store, PostgresTaskStore)
        assert store.schema == namespace
        try:
            task = await store.create(NewTask(new_task_id()))
            assert (await store.get(task.task_id, None)).task_id == task.task_id
        finally:
            await store.close()
    conn = await asyncpg.connect(postgres_url)
    try:
        await conn.execute(f"DROP SCHEMA {namespace} CASCADE")
    finally:
        await conn.close()


def test_repr_masks_the_password() -> None:
    """repr(store) never shows the password of its URL."""
    store = PostgresTaskStore("postgresql://alice:s3cret@db.example/tasks", schema="mcp_x")
    assert "s3cret" not in repr(store)
    assert "alice:***@db.example" in repr(store)


async def test_migrate_is_idempotent_and_safe_concurrently(open_store: OpenStore) -> None:
    """migrate() from several handles at once, and again, leaves one working schema."""
    stores = [await open_store() for _ in range(4)]
    async with anyio.create_task_group() as tg:
        for store in stores:
            tg.start_soon(store.migrate)
    await stores[0].migrate()
    task = await stores[1].create(NewTask(new_task_id()))
    assert (await stores[2].get(task.task_id, None)).revision == 0


async def test_unreachable_server_is_store_unavailable() -> None:
    """A server that does not answer surfaces as StoreUnavailable with the driver error as cause."""
    with anyio.fail_after(30):
        sock_port = 1  # nothing listens on port 1
        store = PostgresTaskStore(f"postgresql://postgres@127.0.0.1:{sock_port}/test")
        with pytest.raises(StoreUnavailable) as caught:
            await store.get(new_task_id(), None)
        assert caught.value.__cause__ is not None
        await store.close()


async def test_closed_store_is_unavailable(open_store: OpenStore) -> None:
    """After close(), every operation raises StoreUnavailable; close() is idempotent."""
    store = await open_store()
    await store.create(NewTask(new_task_id()))
    await store.close()
    await store.close()
    with pytest.raises(StoreUnavailable):
        await store.get(new_task_id(), None)


async def test_leases_follow_the_server_clock(open_store: OpenStore) -> None:
    """A lease's expiry is server now + lease_ms; once it passes, the task is claimable again."""
    store = await open_store()
    task = await store.create(NewTask(new_task_id(), work=WorkSpec("job")))
    conn = await asyncpg.connect(store.dialect.connect_url)
    try:
        before = await conn.fetchval("SELECT floor(extract(epoch from clock_timestamp())*1000)")
        # Long enough that the claim below surely runs while this lease is live.
        first = await store.claim("w1", lease_ms=2_000, task_id=task.task_id)
        after = await conn.fetchval("SELECT floor(extract(epoch from clock_timestamp())*1000)")
    finally:
        await conn.close()
    assert first is not None
    assert before + 2_000 <= first.lease.expires_at <= after + 2_000
    assert await store.claim("w2", lease_ms=2_000, task_id=task.task_id) is None
    await wait_past(store.dialect.connect_url, first.lease.expires_at)
    second = await store.claim("w2", lease_ms=60_000, task_id=task.task_id)
    assert second is not None
    assert second.lease.generation == first.lease.generation + 1
    with pytest.raises(StaleLease):
        await store.put_status(task.task_id, Progress("late"), lease=first.lease)


async def test_creates_at_the_cap_never_exceed_it(open_store: OpenStore, postgres_url: str) -> None:
    """Concurrent creates from separate pools under READ COMMITTED never pass max_rows."""
    cap = 10
    stores = [await open_store(StoreOptions(max_rows=cap), max_connections=3) for _ in range(6)]
    await stores[0].migrate()
    results: list[str] = []

    async def create(i: int) -> None:
        try:
            await stores[i % 6].create(NewTask(new_task_id()))
            results.append("created")
        except TaskLimitReached:
            results.append("limit")

    async with anyio.create_task_group() as tg:
        for i in range(40):
            tg.start_soon(create, i)
    assert results.count("created") == cap
    conn = await asyncpg.connect(postgres_url)
    try:
        assert await conn.fetchval(f"SELECT count(*) FROM {stores[0].schema}.tasks") == cap
    finally:
        await conn.close()


async def test_expired_rows_do_not_count_toward_the_cap(open_store: OpenStore) -> None:
    """At the cap, a row whose TTL has passed no longer counts, even before it is reaped."""
    store = await open_store(StoreOptions(max_rows=2))
    # Long enough that the refused create below surely runs while this row is live.
    doomed = await store.create(NewTask(new_task_id(), ttl_ms=2_000))
    await store.create(NewTask(new_task_id()))
    with pytest.raises(TaskLimitReached):
        await store.create(NewTask(new_task_id(), ttl_ms=2_000))
    assert doomed.expires_at is not None
    await wait_past(store.dialect.connect_url, doomed.expires_at)
    await store.create(NewTask(new_task_id()))
    assert await store.reap() == 1


async def test_per_owner_cap_counts_active_tasks(open_store: OpenStore) -> None:
    """max_active_per_owner counts only that owner's working/input_required tasks."""
    store = await open_store(StoreOptions(max_active_per_owner=1))
    first = await store.create(NewTask(new_task_id(), owner="alice"))
    await store.create(NewTask(new_task_id(), owner="bob"))
    await store.create(NewTask(new_task_id()))
    with pytest.raises(TaskLimitReached):
        await store.create(NewTask(new_task_id(), owner="alice"))
    with pytest.raises(TaskLimitReached):
        await store.create(NewTask(new_task_id()))
    await store.put_status(first.task_id, Complete({"ok": True}))
    await store.create(NewTask(new_task_id(), owner="alice"))


async def test_concurrent_reapers_remove_disjoint_sets(open_store: OpenStore) -> None:
    """Two reapers on separate pools together remove each expired task exactly once."""
    stores = [await open_store() for _ in range(2)]
    doomed = [await stores[0].create(NewTask(new_task_id(), ttl_ms=50)) for _ in range(120)]
    keep = await stores[0].create(NewTask(new_task_id()))
    await wait_past(stores[0].dialect.connect_url, max(task.expires_at or 0 for task in doomed))
    counts: list[int] = []

    async def reaper(store: PostgresTaskStore) -> None:
        while removed := await store.reap(limit=7):
            counts.append(removed)

    async with anyio.create_task_group() as tg:
        for store in stores:
            tg.start_soon(reaper, store)
    assert sum(counts) == 120
    assert (await stores[1].get(keep.task_id, ANY_OWNER)).task_id == keep.task_id


async def test_reaped_task_is_whole_or_gone_for_a_writer(open_store: OpenStore) -> None:
    """A write racing the reaper either lands on the whole task or finds it gone."""
    store, reaper = await open_store(), await open_store()
    tasks = [await store.create(NewTask(new_task_id(), ttl_ms=150)) for _ in range(30)]
    await wait_past(store.dialect.connect_url, max(task.expires_at or 0 for task in tasks))
    outcomes: list[str] = []

    async def write(task_id: str) -> None:
        try:
            await store.put_status(task_id, Progress("x"))
            outcomes.append("written")
        except TaskNotFound:
            outcomes.append("gone")

    async with anyio.create_task_group() as tg:
        tg.start_soon(reaper.reap)
        for task in tasks:
            tg.start_soon(write, task.task_id)
    for task in tasks:
        with pytest.raises(TaskNotFound):
            await store.get(task.task_id, ANY_OWNER)
    assert len(outcomes) == 30


@pytest.mark.parametrize("operation", ["get", "claim", "reap"])
async def test_hot_paths_use_indexes(
    open_store: OpenStore, postgres_url: str, operation: str
) -> None:
    """With thousands of rows the planner serves get, claim and reap from indexes, not scans."""
    store = await open_store()
    await store.migrate()
    schema = store.schema
    conn = await asyncpg.connect(postgres_url)
    try:
        # 20 000 tasks of every kind, created just now, of which 20 have expired.
        await conn.execute(
            f"""INSERT INTO {schema}.tasks SELECT md5(i::text), NULL,
                CASE WHEN i % 3 = 0 THEN 'completed' ELSE 'working' END, 0, now_ms, now_ms,
                CASE WHEN i % 2 = 0 THEN 3600000 END,
                CASE WHEN i % 1000 = 0 THEN 1 WHEN i % 2 = 0 THEN now_ms + 3600000 END,
                i % 5 = 0, NULL, 0, NULL, 0, '{{}}'
                FROM generate_series(1, 20000) i,
                     (SELECT floor(extract(epoch from now()) * 1000)::bigint AS now_ms) n"""
        )
        await conn.execute(f"ANALYZE {schema}.tasks")
        sql = store.dialect.statements
        statement, args = {
            "get": (sql.read, {"task_id": secrets.token_hex(8)}),
            "claim": (sql.claim_next, {}),
            "reap": (sql.reap, {"retention": 3_600_000, "limit": 500}),
        }[operation]
        plan = "\n".join(
            r[0] for r in await conn.fetch("EXPLAIN " + statement.text, *statement.args(args))
        )
    finally:
        await conn.close()
    assert "Seq Scan on tasks" not in plan, plan
    assert "Index" in plan, plan


async def test_caller_errors_are_not_store_failures(open_store: OpenStore) -> None:
    """A bad argument raises its own ValueError, not StoreUnavailable, and writes nothing."""
    store = await open_store()
    task = await store.create(NewTask(new_task_id(), work=WorkSpec("j")))
    with pytest.raises(ValueError, match="lease_ms") as caught:
        await store.claim("w", lease_ms=0)
    assert not isinstance(caught.value, StoreUnavailable)
    assert await store.get(task.task_id, None) == task


async def test_duplicate_creates_leave_the_row_counter_exact(
    open_store: OpenStore, postgres_url: str
) -> None:
    """A refused duplicate id takes its counter bump back: the counter stays the row count."""
    store = await open_store(StoreOptions(max_rows=2))
    first = await store.create(NewTask(new_task_id()))
    for _ in range(3):
        with pytest.raises(DuplicateTaskId):
            await store.create(NewTask(first.task_id))
    await store.create(NewTask(new_task_id()))
    with pytest.raises(TaskLimitReached):
        await store.create(NewTask(new_task_id()))
    conn = await asyncpg.connect(postgres_url)
    try:
        counted = await conn.fetchval(f"SELECT n_rows FROM {store.schema}.task_rows")
        assert counted == await conn.fetchval(f"SELECT count(*) FROM {store.schema}.tasks") == 2
    finally:
        await conn.close()
