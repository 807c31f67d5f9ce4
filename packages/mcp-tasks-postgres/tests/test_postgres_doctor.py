"""`mcp-tasks doctor`'s Postgres checks (``PostgresTaskStore.diagnose``) on a real server."""

from __future__ import annotations

from typing import TYPE_CHECKING

import asyncpg
import pytest

from mcp_tasks import NewTask, StoreUnavailable, new_task_id

if TYPE_CHECKING:
    from conftest import OpenStore

pytestmark = pytest.mark.anyio


async def test_a_migrated_schema_is_ok_and_the_clock_agrees(
    open_store: OpenStore, namespace: str
) -> None:
    """After migrate: the server's version, fsync and synchronous_commit, a complete schema
    counting its tasks, and a clock within a second of this machine's (same machine)."""
    store = await open_store()
    await store.migrate()
    for _ in range(2):
        await store.create(NewTask(new_task_id()))
    rows = await store.diagnose()
    assert [name for name, _, _ in rows] == ["postgres", "durability", "schema", "clock"]
    levels = {name: level for name, level, _ in rows}
    details = {name: detail for name, _, detail in rows}
    assert levels["postgres"] == "ok"
    assert details["postgres"].startswith("PostgreSQL ")
    assert details["durability"].startswith("fsync ")
    assert (levels["schema"], details["schema"]) == (
        "ok",
        f"schema {namespace!r}: every table and index present; the row counter says 2 tasks "
        "(expired ones count until reaped)",
    )
    assert levels["clock"] == "ok"


async def test_a_missing_index_fails_the_schema_row(
    open_store: OpenStore, postgres_url: str, namespace: str
) -> None:
    """A schema missing one index is a failed schema row naming it and the fix."""
    store = await open_store()
    await store.migrate()
    conn = await asyncpg.connect(postgres_url)
    try:
        await conn.execute(f'DROP INDEX "{namespace}".tasks_claim_ix')
    finally:
        await conn.close()
    rows = await store.diagnose()
    assert (
        "schema",
        "fail",
        f"schema {namespace!r}: missing tasks_claim_ix; run mcp-tasks migrate",
    ) in rows


async def test_a_closed_store_is_refused(open_store: OpenStore) -> None:
    """diagnose on a closed store raises StoreUnavailable, as every operation does."""
    store = await open_store()
    await store.close()
    with pytest.raises(StoreUnavailable):
        await store.diagnose()
