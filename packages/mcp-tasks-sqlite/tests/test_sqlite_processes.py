"""Several processes share one SQLite file: no lost update, never over the row cap."""

from __future__ import annotations

import sqlite3
import sys
import textwrap
from typing import TYPE_CHECKING

import anyio
import pytest

from mcp_tasks import NewTask, StoreOptions, new_task_id

if TYPE_CHECKING:
    from pathlib import Path

    from conftest import OpenStore

pytestmark = pytest.mark.anyio

PROCESS_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from mcp_tasks import NewTask, Progress, StoreOptions, TaskLimitReached, new_task_id
    from mcp_tasks_sqlite import SQLiteTaskStore

    async def main(path, task_id, writes):
        store = SQLiteTaskStore(path, StoreOptions(max_rows=31))
        created = 0
        for i in range(writes):
            await store.put_status(task_id, Progress(str(i)))
            try:
                await store.create(NewTask(new_task_id()))
                created += 1
            except TaskLimitReached:
                pass
        await store.close()
        print(created)

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
    """
)


async def test_several_processes_share_one_file_safely(
    open_store: OpenStore, db_path: Path
) -> None:
    """4 processes writing one task and creating at the cap: no lost update, never over the cap."""
    store = await open_store(StoreOptions(max_rows=31))
    task = await store.create(NewTask(new_task_id()))
    outputs: list[str] = []

    async def run_process() -> None:
        args = [sys.executable, "-c", PROCESS_SCRIPT, str(db_path), task.task_id, "25"]
        done = await anyio.run_process(args, check=True)
        outputs.append(done.stdout.decode())

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(run_process)
    created = sum(int(out) for out in outputs)
    assert (await store.get(task.task_id, None)).revision == 100
    assert created == 30
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM tasks").fetchone()[0] == 31
