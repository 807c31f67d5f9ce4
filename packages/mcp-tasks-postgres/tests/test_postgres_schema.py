"""The Postgres store's schema: migrate under an advisory lock, indexes for the hot paths,
the row counter the cap reads, and the counts per status its triggers keep."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

import anyio
import asyncpg
import pytest

from mcp_tasks import (
    DuplicateTaskId,
    NewTask,
    RequireInput,
    StoreOptions,
    TaskLimitReached,
    TaskStatus,
    WorkSpec,
    new_task_id,
)

#: An input request (what a task asks for when it moves to input_required).
ELICIT = {"method": "elicitation/create", "params": {"message": "Proceed?"}}

if TYPE_CHECKING:
    from conftest import OpenStore

pytestmark = pytest.mark.anyio


async def test_migrate_is_idempotent_and_safe_concurrently(open_store: OpenStore) -> None:
    """migrate() from several handles at once, and again, leaves one working schema."""
    stores = [await open_store() for _ in range(4)]
    async with anyio.create_task_group() as tg:
        for store in stores:
            tg.start_soon(store.migrate)
    await stores[0].migrate()
    task = await stores[1].create(NewTask(new_task_id()))
    assert (await stores[2].get(task.task_id, None)).revision == 0


@pytest.mark.parametrize("operation", ["get", "claim", "claim_of_a_type", "claim_of_types", "reap"])
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
                i % 5 = 0, NULL, 0, NULL, 0, '{{}}',
                CASE WHEN i % 5 = 0 THEN 'tool_' || (i % 7)::text END
                FROM generate_series(1, 20000) i,
                     (SELECT floor(extract(epoch from now()) * 1000)::bigint AS now_ms) n"""
        )
        await conn.execute(f"ANALYZE {schema}.tasks")
        sql = store.dialect.statements
        statement, args = {
            "get": (sql.read, {"task_id": secrets.token_hex(8)}),
            "claim": (sql.claim_next, {}),
            "claim_of_a_type": (sql.claim_next_of(1), {"work_type_0": "tool_3"}),
            "claim_of_types": (
                sql.claim_next_of(2),
                {"work_type_0": "tool_3", "work_type_1": "tool_4"},
            ),
            "reap": (sql.reap, {"retention": 3_600_000, "limit": 500}),
        }[operation]
        plan = "\n".join(
            r[0] for r in await conn.fetch("EXPLAIN " + statement.text, *statement.args(args))
        )
    finally:
        await conn.close()
    assert "Seq Scan on tasks" not in plan, plan
    assert "Index" in plan, plan


async def test_duplicate_creates_leave_the_row_counter_exact(
    open_store: OpenStore, postgres_url: str
) -> None:
    """A refused duplicate id takes its counter bump back, with an owner (held to the
    per-owner cap: its turn is taken too) or without: the counter stays the row count."""
    store = await open_store(StoreOptions(max_rows=2))
    first = await store.create(NewTask(new_task_id(), owner="alice"))
    for owner in ("alice", None, "bob"):
        with pytest.raises(DuplicateTaskId):
            await store.create(NewTask(first.task_id, owner=owner))
    await store.create(NewTask(new_task_id()))
    with pytest.raises(TaskLimitReached):
        await store.create(NewTask(new_task_id()))
    conn = await asyncpg.connect(postgres_url)
    try:
        counted = await conn.fetchval(f"SELECT n_rows FROM {store.schema}.task_rows WHERE id = 1")
        assert counted == await conn.fetchval(f"SELECT count(*) FROM {store.schema}.tasks") == 2
    finally:
        await conn.close()


async def test_migrate_adds_the_work_type_to_an_older_table(
    open_store: OpenStore, postgres_url: str
) -> None:
    """A table from before the ``work_type`` column (S-CLAIM.4): ``migrate`` on first use
    adds the column and its index and fills it from the payload, so claims for the type
    find the tasks written before."""
    old = await open_store()
    alpha = await old.create(NewTask(new_task_id(), work=WorkSpec("alpha")))
    beta = await old.create(NewTask(new_task_id(), work=WorkSpec("beta")))
    conn = await asyncpg.connect(postgres_url)
    try:
        await conn.execute(f"DROP INDEX {old.schema}.tasks_claim_type_ix")
        await conn.execute(f"ALTER TABLE {old.schema}.tasks DROP COLUMN work_type")
    finally:
        await conn.close()
    store = await open_store()
    claimed = await store.claim("w", lease_ms=30_000, work_types=frozenset({"beta"}))
    assert claimed is not None
    assert claimed.record.task_id == beta.task_id
    claimed = await store.claim("w", lease_ms=30_000, work_types=frozenset({"alpha"}))
    assert claimed is not None
    assert claimed.record.task_id == alpha.task_id
    assert not await store.migrate()  # complete now: the table was there


async def test_reap_reads_its_indexes_before_the_table_has_statistics(
    open_store: OpenStore, postgres_url: str
) -> None:
    """Beside 20 000 unexpired tasks written just now, with no statistics gathered yet (the
    planner then guesses many rows reapable), the reap still reads the expired rows from
    the ``expires_at`` index, not a scan of the table from its start."""
    store = await open_store()
    await store.migrate()
    schema = store.schema
    conn = await asyncpg.connect(postgres_url)
    try:
        await conn.execute(
            f"""INSERT INTO {schema}.tasks SELECT 'task-' || i, 'owner-' || (i % 2000),
                CASE WHEN i % 5 = 0 THEN 'working' ELSE 'completed' END, 0, now_ms, now_ms,
                3600000, CASE WHEN i > 19000 THEN 1 ELSE now_ms + 3600000 END,
                i % 5 = 0, NULL, 0, NULL, 0, '{{}}', NULL
                FROM generate_series(1, 20000) i,
                     (SELECT floor(extract(epoch from now()) * 1000)::bigint AS now_ms) n"""
        )
        sql = store.dialect.statements.reap
        plan = "\n".join(
            r[0]
            for r in await conn.fetch(
                "EXPLAIN " + sql.text, *sql.args({"retention": 3_600_000, "limit": 500})
            )
        )
    finally:
        await conn.close()
    assert "Seq Scan on tasks" not in plan, plan
    assert "tasks_expires_ix" in plan, plan
    assert await store.reap(limit=2_000) == 1_000


async def test_migrate_counts_the_tasks_of_an_older_table(
    open_store: OpenStore, postgres_url: str
) -> None:
    """A schema from before the counts per status: the first use of a new handle makes the
    counters from the tasks there (held against writers meanwhile) and the triggers that
    keep them, so ``counts()`` is exact at once and stays so."""
    old = await open_store()
    tasks = [await old.create(NewTask(new_task_id(), ttl_ms=3_600_000)) for _ in range(5)]
    await old.cancel(tasks[0].task_id, None)
    await old.create(NewTask(new_task_id(), ttl_ms=1))  # expired: a row, in no status
    conn = await asyncpg.connect(postgres_url)
    try:
        for table in ("task_status_counts", "task_owner_counts", "task_expiry_counts"):
            await conn.execute(f"DROP TABLE {old.schema}.{table}")
        await conn.execute(f"DROP FUNCTION {old.schema}.tasks_count_row() CASCADE")
        await conn.execute(f"DROP FUNCTION {old.schema}.tasks_count_gone() CASCADE")
    finally:
        await conn.close()
    store = await open_store()
    await store.get(tasks[1].task_id, None)  # the first use migrates
    counts = await store.counts()
    assert (counts.rows, counts.by_status[TaskStatus.WORKING]) == (6, 4)
    assert counts.by_status[TaskStatus.CANCELLED] == 1
    await store.cancel(tasks[1].task_id, None)
    assert await store.reap() == 1
    counts, stats = await store.counts(), await store.stats()
    assert (counts.rows, dict(counts.by_status)) == (stats.rows, dict(stats.by_status))
    assert (counts.rows, counts.by_status[TaskStatus.CANCELLED]) == (5, 2)


async def test_counters_take_no_deadlock_from_writers_moving_tasks_both_ways(
    open_store: OpenStore,
) -> None:
    """Many writers at once, some moving tasks from working to input_required and others
    back, beside creates and reapers: every counter update takes its rows in one order, so
    none fails (no deadlock), and the counts are exact afterwards."""
    stores = [await open_store(StoreOptions(max_rows=None)) for _ in range(4)]
    asking = [await stores[0].create(NewTask(new_task_id())) for _ in range(40)]
    answering = [await stores[1].create(NewTask(new_task_id())) for _ in range(40)]
    for task in answering:
        await stores[1].put_status(task.task_id, RequireInput({"a": ELICIT}))

    async with anyio.create_task_group() as group:
        for i, task in enumerate(asking):
            store = stores[i % 4]
            group.start_soon(store.put_status, task.task_id, RequireInput({"a": ELICIT}))
        for i, task in enumerate(answering):
            group.start_soon(stores[(i + 1) % 4].update, task.task_id, None, {"a": "yes"})
        for i in range(40):
            group.start_soon(stores[i % 4].create, NewTask(new_task_id(), ttl_ms=1))
        for store in stores:
            group.start_soon(store.reap)
    while await stores[2].reap():
        pass
    counts, stats = await stores[3].counts(), await stores[3].stats()
    assert (counts.rows, dict(counts.by_status)) == (stats.rows, dict(stats.by_status))
    assert counts.by_status[TaskStatus.WORKING] == 40
    assert counts.by_status[TaskStatus.INPUT_REQUIRED] == 40
