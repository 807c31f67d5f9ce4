"""The engine over real SQL stores: hostile ids never reach a driver, and a store that fails
answers -32603 with nothing half-written."""

from __future__ import annotations

import secrets
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import asyncpg
import pytest
from mcp.shared.exceptions import MCPError

from mcp_tasks import RequestView, Tasks
from mcp_tasks_contract.servers import postgres_url
from mcp_tasks_postgres import PostgresTaskStore
from mcp_tasks_sqlite import SQLiteTaskStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from mcp_tasks.store import Store

__all__ = ["postgres_url"]

pytestmark = pytest.mark.anyio

TASKS_CAPS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
UNAVAILABLE = {"code": -32603, "message": "Task store unavailable"}
NOT_FOUND = {"code": -32602, "message": "Failed to retrieve task: Task not found", "data": None}


@asynccontextmanager
async def postgres_store(url: str) -> AsyncIterator[PostgresTaskStore]:
    """A Postgres store in a fresh schema, dropped afterwards."""
    schema = "mcpt_wire_" + secrets.token_hex(6)
    store = PostgresTaskStore(url, schema=schema)
    try:
        yield store
    finally:
        await store.close()
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        finally:
            await conn.close()


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SQLiteTaskStore]:
    store = SQLiteTaskStore(tmp_path / "tasks.db", busy_timeout_s=0.2)
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture(params=["sqlite", "postgres"])
async def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Each SQL store on a real database."""
    if request.param == "sqlite":
        store = SQLiteTaskStore(tmp_path / "tasks.db")
        try:
            yield store
        finally:
            await store.close()
        return
    async with postgres_store(request.getfixturevalue("postgres_url")) as pg:
        yield pg


async def test_ids_no_task_can_have_never_reach_the_store(sql_store: Store) -> None:
    """A NUL (Postgres refuses it) or a lone surrogate (neither driver can encode it) in a
    taskId answers "not found", like any unknown id, not -32603 or a driver exception."""
    tasks = Tasks(store=sql_store)
    view = RequestView(protocol_version="2026-07-28", client_capabilities=TASKS_CAPS)
    async with tasks.running():
        for task_id in ("x\x00y", "\ud800x"):
            for method in ("tasks/get", "tasks/update", "tasks/cancel"):
                with pytest.raises(MCPError) as caught:
                    await tasks.engine.handle_tasks_method(
                        view, method, {"taskId": task_id, "inputResponses": {}}
                    )
                assert caught.value.error.model_dump() == NOT_FOUND
