"""One bound on waiting for a store, the same on every store: with the store's server gone
(a closed port, a server that accepts and never answers, a SQLite file another connection
holds locked) a request answers -32603 "Task store unavailable" within the store's
``timeout_ms``, set here by the URL's ``?timeout_ms=``."""

from __future__ import annotations

import secrets
import sqlite3
import time
from contextlib import asynccontextmanager, closing
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import httpx2 as httpx
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks import StoreOptions, TaskContext, Tasks, store_from_url
from mcp_tasks.stores.opening import with_query
from mcp_tasks.testing import RawClient, free_socket, running_asgi

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from mcp_tasks.stores.protocol import Store

pytestmark = pytest.mark.anyio

TASKS_CAPS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
UNAVAILABLE = {"code": -32603, "message": "Task store unavailable"}
#: The bound the tests set; the drivers' defaults are far longer (PyMongo: 30 s).
BOUND_MS = 1_000
#: Generous, for a loaded machine: what the bound promises is "seconds, not minutes".
SLACK_S = 3.0

SERVER_URLS = {
    "postgres": "postgresql://postgres@127.0.0.1:{port}/test",
    "redis": "redis://127.0.0.1:{port}/0",
    "mongodb": "mongodb://127.0.0.1:{port}/test?directConnection=true",
}


def build_server(tasks: Tasks) -> MCPServer[Any]:
    mcp: MCPServer[Any] = MCPServer(
        "bound", extensions=[tasks.extension()], lifespan=tasks.lifespan
    )

    @tasks.tool(mcp, mode="required")
    async def ask(ctx: TaskContext) -> str:
        return str(await ctx.elicit("name", "Name?"))

    return mcp


@asynccontextmanager
async def serving(store: Store) -> AsyncIterator[RawClient]:
    tasks = Tasks(store=store)
    app = build_server(tasks).streamable_http_app()
    try:
        async with running_asgi(app) as url, httpx.AsyncClient(timeout=60) as http:
            yield RawClient(http, url)
    finally:
        await store.close()


@asynccontextmanager
async def silent_server() -> AsyncIterator[int]:
    """A port that accepts connections and never answers: a server that hangs."""

    async def hold(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            await anyio.sleep_forever()

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port: int = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, hold)
        try:
            yield port
        finally:
            group.cancel_scope.cancel()


def closed_port() -> int:
    with closing(free_socket()) as sock:
        port: int = sock.getsockname()[1]
    return port


async def timed_answers(client: RawClient, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Each call's (seconds, JSON-RPC error), all sent at once."""
    answers: list[Any] = [None] * len(calls)

    async def one(index: int, method: str, params: dict[str, Any]) -> None:
        started = time.monotonic()
        reply = await client.post(method, params)
        assert reply.status_code == 200
        answers[index] = (method, time.monotonic() - started, reply.json().get("error"))

    async with anyio.create_task_group() as group:
        for index, (method, params) in enumerate(calls):
            group.start_soon(one, index, method, params)
    return answers


def every_request(task_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("tools/call", {"name": "ask"}),
        ("tasks/get", {"taskId": task_id}),
        ("tasks/update", {"taskId": task_id, "inputResponses": {"k": {"action": "cancel"}}}),
        ("tasks/cancel", {"taskId": task_id}),
    ]


def assert_within_bound(answers: list[Any]) -> None:
    for method, seconds, error in answers:
        assert error == UNAVAILABLE, method
        assert seconds < BOUND_MS / 1000 + SLACK_S, f"{method} answered after {seconds:.1f} s"


@pytest.mark.parametrize("backend", ["postgres", "redis", "mongodb"])
@pytest.mark.parametrize("gone", ["closed", "silent"])
async def test_a_server_that_is_gone_is_answered_within_the_bound(backend: str, gone: str) -> None:
    """A server-backed store whose server is gone, refused (a closed port) or hanging (a
    silent one): tools/call, tasks/get, tasks/update and tasks/cancel, sent at once, each
    answer -32603 within ``?timeout_ms=`` (+ slack), not after the driver's own defaults."""
    calls = every_request(secrets.token_urlsafe(32))
    async with silent_server() as silent_port:
        port = closed_port() if gone == "closed" else silent_port
        url = with_query(SERVER_URLS[backend].format(port=port), timeout_ms=str(BOUND_MS))
        async with serving(store_from_url(url)) as client:
            assert_within_bound(await timed_answers(client, calls))


async def test_a_locked_sqlite_file_is_answered_within_the_bound(tmp_path: Path) -> None:
    """While another connection holds the SQLite file's write lock, every write (a create,
    an update, a cancel) answers -32603 within ``?timeout_ms=`` (+ slack): the busy timeout
    is the store's bound (SQLite's own default in this store was 30 s)."""
    path = tmp_path / "tasks.db"
    store = store_from_url(f"sqlite:///{path}?timeout_ms={BOUND_MS}")
    await store.migrate()  # type: ignore[attr-defined]
    some_id = secrets.token_urlsafe(32)
    async with serving(store) as client:
        locker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        try:
            await anyio.to_thread.run_sync(locker.execute, "BEGIN IMMEDIATE")
            writes = [call for call in every_request(some_id) if call[0] != "tasks/get"]
            answers = await timed_answers(client, writes)
        finally:
            locker.rollback()
            locker.close()
    assert_within_bound(answers)


def test_the_bound_is_a_store_option_and_a_url_option() -> None:
    """``StoreOptions.timeout_ms`` defaults to a few seconds; a URL's ``?timeout_ms=`` sets
    it on every store and is not passed on to the driver; a bad value is refused."""
    assert StoreOptions().timeout_ms == 5_000
    for url in (
        "memory://?timeout_ms=250",
        "sqlite:///tasks.db?timeout_ms=250",
        "postgresql://u@h/db?timeout_ms=250",
        "redis://h:6379/0?timeout_ms=250",
        "mongodb://h:27017/db?timeout_ms=250",
    ):
        store = store_from_url(url, StoreOptions(timeout_ms=9_000))
        assert store.options.timeout_ms == 250, url  # type: ignore[attr-defined]
        assert "timeout_ms" not in getattr(store, "connect_url", ""), url
    for bad in ("0", "-1", "1.5", "soon"):
        with pytest.raises(ValueError, match="timeout_ms"):
            store_from_url(f"memory://?timeout_ms={bad}")
    with pytest.raises(ValueError, match="timeout_ms"):
        StoreOptions(timeout_ms=0)
