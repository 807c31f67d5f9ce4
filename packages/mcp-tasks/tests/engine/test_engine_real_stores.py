"""The engine over real SQL stores: hostile ids never reach a driver, and a store that fails
answers -32603 with nothing half-written."""

from __future__ import annotations

import secrets
import socket
import sqlite3
from contextlib import asynccontextmanager, closing
from typing import TYPE_CHECKING, Any

import anyio
import httpx2 as httpx
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from mcp_tasks import (
    RequestView,
    TaskContext,
    Tasks,
    drop_namespace,
    namespaced_url,
    store_from_url,
)
from mcp_tasks.domain.rules import ANY_OWNER
from mcp_tasks.testing import RawClient, running_asgi
from mcp_tasks_postgres import PostgresTaskStore
from mcp_tasks_sqlite import SQLiteTaskStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from mcp_tasks.stores.protocol import Store


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
        await drop_namespace(namespaced_url(url, schema))


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SQLiteTaskStore]:
    store = SQLiteTaskStore(tmp_path / "tasks.db", busy_timeout_s=0.2)
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture(params=["sqlite", "postgres", "redis"])
async def durable_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Each durable store on a real server (a namespace of its own, dropped afterwards)."""
    if request.param == "postgres":
        async with postgres_store(request.getfixturevalue("postgres_url")) as pg:
            yield pg
        return
    if request.param == "sqlite":
        store: Store = SQLiteTaskStore(tmp_path / "tasks.db")
        url = None
    else:
        url = namespaced_url(
            request.getfixturevalue("redis_url"), "mcpt_wire_" + secrets.token_hex(6)
        )
        store = store_from_url(url)
    try:
        yield store
    finally:
        await store.close()
        if url is not None:
            await drop_namespace(url)


async def test_ids_no_task_can_have_never_reach_the_store(durable_store: Store) -> None:
    """A NUL (Postgres refuses it) or a lone surrogate (no driver can encode it) in a
    taskId answers "not found", like any unknown id, not -32603 or a driver exception."""
    tasks = Tasks(store=durable_store)
    view = RequestView(protocol_version="2026-07-28", client_capabilities=TASKS_CAPS)
    async with tasks.running():
        for task_id in ("x\x00y", "\ud800x"):
            for method in ("tasks/get", "tasks/update", "tasks/cancel"):
                with pytest.raises(MCPError) as caught:
                    await tasks.engine.handle_tasks_method(
                        view, method, {"taskId": task_id, "inputResponses": {}}
                    )
                assert caught.value.error.model_dump() == NOT_FOUND


def build_server(tasks: Tasks) -> MCPServer[Any]:
    mcp: MCPServer[Any] = MCPServer(
        "stores", extensions=[tasks.extension()], lifespan=tasks.lifespan
    )

    @tasks.tool(mcp, mode="required")
    async def ask(ctx: TaskContext) -> str:
        answer = await ctx.elicit("name", "Name?")
        return str(answer)

    return mcp


@asynccontextmanager
async def http_client(tasks: Tasks) -> AsyncIterator[RawClient]:
    app = build_server(tasks).streamable_http_app()
    async with running_asgi(app) as url, httpx.AsyncClient(timeout=10) as http:
        yield RawClient(http, url)


async def wait_for(client: RawClient, task_id: str, status: str) -> dict[str, Any]:
    with anyio.fail_after(10):
        while True:
            result: dict[str, Any] = (await client.call("tasks/get", {"taskId": task_id}))["result"]
            if result["status"] == status:
                return result
            await anyio.sleep(0.05)


def count_rows(path: Path) -> int:
    with closing(sqlite3.connect(path)) as conn:
        tables = [
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        (table,) = [name for name in tables if name.endswith("tasks")]
        (count,) = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        return int(count)


async def test_a_locked_sqlite_file_answers_internal_error_and_writes_nothing(
    sqlite_store: SQLiteTaskStore,
) -> None:
    """While another connection holds the file's write lock, tasks/update, tasks/cancel and a
    task-creating tools/call answer -32603 "Task store unavailable" (HTTP 200, no internals
    named); once the lock is gone the parked task is exactly as it was and no task was added."""
    tasks = Tasks(store=sqlite_store)
    async with http_client(tasks) as client:
        created = (await client.call("tools/call", {"name": "ask"}))["result"]
        task_id = created["taskId"]
        parked = await wait_for(client, task_id, "input_required")
        locker = sqlite3.connect(sqlite_store.path, isolation_level=None, check_same_thread=False)
        try:
            # From a thread: a store transaction may be mid-way (its statements hop through
            # this event loop), and waiting for the lock on the loop itself would deadlock it.
            await anyio.to_thread.run_sync(locker.execute, "BEGIN IMMEDIATE")
            answer = {"name": {"action": "accept", "content": {"name": "Luca"}}}
            replies = [
                await client.post("tasks/update", {"taskId": task_id, "inputResponses": answer}),
                await client.post("tasks/cancel", {"taskId": task_id}),
                await client.post("tools/call", {"name": "ask"}),
            ]
        finally:
            locker.rollback()
            locker.close()
        for reply in replies:
            assert reply.status_code == 200
            assert reply.json()["error"] == UNAVAILABLE
        after = (await client.call("tasks/get", {"taskId": task_id}))["result"]
        assert (after["status"], after["lastUpdatedAt"], after["inputRequests"]) == (
            "input_required",
            parked["lastUpdatedAt"],
            parked["inputRequests"],
        )
        assert (await sqlite_store.get(task_id, ANY_OWNER)).input_responses == {}
    assert count_rows(sqlite_store.path) == 1


def closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.parametrize(
    "url",
    ["postgresql://postgres@127.0.0.1:{port}/test", "redis://127.0.0.1:{port}/0"],
    ids=["postgres", "redis"],
)
async def test_an_unreachable_server_answers_internal_error_on_every_method(url: str) -> None:
    """A Postgres or Redis store pointed at a closed port: every tasks/* method and a
    task-creating tools/call answer -32603 "Task store unavailable", naming no driver, host
    or port."""
    store = store_from_url(url.format(port=closed_port()))
    tasks = Tasks(store=store)
    try:
        async with http_client(tasks) as client:
            some_id = secrets.token_urlsafe(32)
            requests: list[tuple[str, dict[str, Any]]] = [
                ("tasks/get", {"taskId": some_id}),
                (
                    "tasks/update",
                    {"taskId": some_id, "inputResponses": {"k": {"action": "cancel"}}},
                ),
                ("tasks/cancel", {"taskId": some_id}),
                ("tools/call", {"name": "ask"}),
            ]
            for method, params in requests:
                reply = await client.post(method, params)
                assert reply.status_code == 200
                assert reply.json()["error"] == UNAVAILABLE
    finally:
        await store.close()


async def test_a_task_is_created_claimed_in_its_one_insert(
    sqlite_store: SQLiteTaskStore,
) -> None:
    """The row a task-creating call inserts already carries the runner's claim (S-CREATE.6):
    no claim update follows, so no other process's recovery loop can take the task between
    its creation and its first run. Real SQLite triggers refuse an unclaimed insert and any
    later write that sets a claim; the call still answers a task, which completes."""
    await sqlite_store.migrate()
    with closing(sqlite3.connect(sqlite_store.path)) as conn:
        conn.executescript(
            "CREATE TRIGGER insert_claimed BEFORE INSERT ON tasks "
            "WHEN NEW.claim_expires_at IS NULL BEGIN SELECT RAISE(ABORT, 'unclaimed'); END;"
            "CREATE TRIGGER no_later_claims BEFORE UPDATE OF generation ON tasks "
            "WHEN NEW.generation <> OLD.generation BEGIN SELECT RAISE(ABORT, 'claim'); END;"
        )
    tasks = Tasks(store=sqlite_store)
    async with http_client(tasks) as client:
        reply = await client.post("tools/call", {"name": "ask"})
        created = reply.json()["result"]
        assert created["resultType"] == "task"
        assert created["status"] == "working"
        task_id = created["taskId"]
        record = await sqlite_store.get(task_id, ANY_OWNER)
        assert record.generation == 1
        assert record.claim is not None
        assert record.claim.worker_id == tasks.runner.worker_id
        await wait_for(client, task_id, "input_required")
        answer = {"name": {"action": "accept", "content": {"name": "Ada"}}}
        await client.call("tasks/update", {"taskId": task_id, "inputResponses": answer})
        done = await wait_for(client, task_id, "completed")
    assert "Ada" in str(done["result"])
