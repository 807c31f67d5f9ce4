"""When the ``tasks/*`` fast path must step aside, over real HTTP: whenever something on the
server other than our handler would act on the request, the SDK's path answers it, and the
client sees what that something does (a user's middleware refusing it, a cache hint,
another handler, another engine, a server whose lifespan has not run). The SDK's span
middleware is no reason to step aside: the fast path makes its span
(``test_fast_path_spans.py``).

Each step-aside condition of ``adapters/fast_path.py`` that concerns the server (not the
request's bytes, which ``test_fast_path_differential.py`` covers) has a test here."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import httpx2 as httpx
import pytest
import uvicorn
from fast_path_servers import build_server, start
from mcp.server.caching import CacheHint
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolRequestParams, CallToolResult, RequestParams, TextContent

from mcp_tasks import MemoryTaskStore, Tasks
from mcp_tasks.adapters.fast_path import TasksFastPath
from mcp_tasks.domain.models import NewTask
from mcp_tasks.testing import RawClient, free_socket, running_asgi

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def client_of(app: Any) -> AsyncIterator[RawClient]:
    async with running_asgi(app) as url, httpx.AsyncClient(timeout=10) as http:
        yield RawClient(http, url)


async def test_a_users_server_middleware_sees_and_may_refuse_every_tasks_request() -> None:
    """An audit and policy middleware of the user's on the server: it sees each tasks/*
    request, and its refusal of a cancel is the answer (the task is not cancelled). A fast
    path that answered past it would bypass the user's auth or audit silently."""
    seen: list[str] = []

    async def audit_and_refuse_cancel(
        ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        seen.append(ctx.method)
        if ctx.method == "tasks/cancel":
            raise MCPError(code=-32001, message="Cancelling is not allowed here")
        return await call_next(ctx)

    tasks = Tasks(store=MemoryTaskStore())
    mcp = build_server(tasks, "steps-aside", middleware=[audit_and_refuse_cancel])
    app = tasks.http_app(mcp)
    assert isinstance(app, TasksFastPath)
    async with client_of(app) as client:
        task_id = await start(client, "ask", {}, "input_required")
        seen.clear()
        got = await client.call("tasks/get", {"taskId": task_id})
        refused = await client.call("tasks/cancel", {"taskId": task_id})
        after = await client.call("tasks/get", {"taskId": task_id})
    assert seen == ["tasks/get", "tasks/cancel", "tasks/get"]
    assert got["result"]["status"] == "input_required"
    assert refused["error"] == {"code": -32001, "message": "Cancelling is not allowed here"}
    assert after["result"]["status"] == "input_required"
    assert app.served == 0


@asynccontextmanager
async def serving_without_lifespan(app: Any) -> AsyncIterator[RawClient]:
    """``app`` over real HTTP with its lifespan never run (uvicorn ``lifespan="off"``)."""
    sock = free_socket()
    config = uvicorn.Config(app, log_level="critical", lifespan="off", ws="none")
    server = uvicorn.Server(config)
    try:
        async with anyio.create_task_group() as tg, httpx.AsyncClient(timeout=10) as http:
            tg.start_soon(server.serve, [sock])
            with anyio.fail_after(10):
                while not server.started:  # noqa: ASYNC110 (uvicorn offers no event)
                    await anyio.sleep(0.01)
            try:
                yield RawClient(http, f"http://127.0.0.1:{sock.getsockname()[1]}/mcp")
            finally:
                server.should_exit = True
    finally:
        sock.close()


async def test_before_the_lifespan_runs_tasks_requests_get_the_sdks_answer() -> None:
    """Served without its lifespan, the runner is not running and the SDK's session manager
    neither: a tasks/get of a task that is in the store gets the SDK's answer (a 500), as on
    the SDK's app alone, not the task from the store."""
    store = MemoryTaskStore()
    tasks = Tasks(store=store)
    await store.create(NewTask(task_id="in-the-store", ttl_ms=None))
    mcp = build_server(tasks, "steps-aside")
    answers = []
    for app in (mcp.streamable_http_app(), tasks.http_app(mcp)):
        async with serving_without_lifespan(app) as client:
            response = await client.post("tasks/get", {"taskId": "in-the-store"})
            answers.append((response.status_code, response.content))
    assert answers[0] == (500, b"Internal Server Error")
    assert answers[1] == answers[0]


async def test_a_cache_hint_for_tasks_get_reaches_the_answer() -> None:
    """A server whose cache hints cover tasks/get: the SDK adds the hint's fields the
    handler left unset (``cacheScope``) to the result, so the answer carries them."""
    tasks = Tasks(store=MemoryTaskStore())
    mcp = build_server(tasks, "steps-aside")
    app = tasks.http_app(mcp)
    mcp.session_manager.app.cache_hints["tasks/get"] = CacheHint(ttl_ms=0, scope="public")
    async with client_of(app) as client:
        task_id = await start(client, "echo", {"text": "hi"}, "completed")
        got = await client.call("tasks/get", {"taskId": task_id})
    assert got["result"]["status"] == "completed"
    assert got["result"]["cacheScope"] == "public"
    assert app.served == 0


class ReplacedParams(RequestParams):
    """The params of a tasks/get handler of the user's own."""


async def test_a_tasks_handler_of_the_users_own_answers_its_requests() -> None:
    """A low-level server whose tasks/get handler the user replaced after the install: that
    handler answers, not our engine."""
    tasks = Tasks(store=MemoryTaskStore())

    async def call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text="ran")])

    async def own_get(ctx: Any, params: ReplacedParams) -> dict[str, Any]:
        return {"resultType": "complete", "answeredBy": "the user's handler"}

    server: Server[Any] = Server("replaced", on_call_tool=call_tool, lifespan=tasks.lifespan)
    tasks.install(server)
    tasks.register("run", mode="required")
    server.add_request_handler("tasks/get", ReplacedParams, own_get)
    app = tasks.http_app(server)
    async with client_of(app) as client:
        created = await client.call("tools/call", {"name": "run", "arguments": {}})
        got = await client.call("tasks/get", {"taskId": created["result"]["taskId"]})
    assert got["result"]["answeredBy"] == "the user's handler"
    assert app.served == 0


async def test_the_fast_path_of_another_tasks_than_the_servers_steps_aside() -> None:
    """The server's extension is one Tasks's; the app is another's ``http_app`` (both
    running): the task created through the server is answered by the server's own engine
    (its store), not by the other Tasks's."""
    served_by = Tasks(store=MemoryTaskStore())
    other = Tasks(store=MemoryTaskStore())
    mcp = build_server(served_by, "steps-aside")
    app = other.http_app(mcp)
    async with other.running(), client_of(app) as client:
        task_id = await start(client, "echo", {"text": "hi"}, "completed")
        got = await client.call("tasks/get", {"taskId": task_id})
    assert got["result"]["status"] == "completed"
    assert app.served == 0
