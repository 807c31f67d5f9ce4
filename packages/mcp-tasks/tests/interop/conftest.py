"""Our server, on each real Store, served over real Streamable HTTP for clients we did not
write (fastmcp-tasks' client, the official SDK's ``Client``).

``store`` is the memory store, a SQLite file and a fresh Postgres schema (dropped afterwards;
the server is the one ``mcp_tasks_postgres.provision`` finds: a missing one skips locally
and fails when ``CI`` is set). ``serve`` builds an ``MCPServer`` with :func:`build_server`'s
tools on ``Tasks(store=store)`` and serves it with ``running_asgi``; ``serve_fastmcp`` builds
the same tools as FastMCP task tools with our FastMCP extension (:func:`build_fastmcp_server`).
"""

from __future__ import annotations

import secrets
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from fastmcp import FastMCP
from fastmcp.utilities.tasks import TaskConfig
from mcp.server.mcpserver import MCPServer

from mcp_tasks import TaskContext, Tasks, current_task_context, drop_namespace, namespaced_url
from mcp_tasks.stores.opening import store_from_url
from mcp_tasks.testing import running, running_asgi

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from contextlib import AbstractAsyncContextManager
    from pathlib import Path

    from mcp_tasks.stores.protocol import Store


#: What ``confirm`` asks: one form field.
NOTE_SCHEMA = {"type": "object", "properties": {"note": {"type": "string"}}}


@dataclass
class Probe:
    """What the task bodies let a test see and steer, in the order it happened."""

    #: ``double`` waits for this before it answers, so a client can see it ``working``.
    release: anyio.Event = field(default_factory=anyio.Event)
    started: anyio.Event = field(default_factory=anyio.Event)
    stopped: anyio.Event = field(default_factory=anyio.Event)
    #: What happened, in order: the bodies and the test both append.
    events: list[str] = field(default_factory=list)
    #: The ids of the tasks the bodies ran as (kept in memory, never printed).
    task_ids: list[str] = field(default_factory=list)

    async def run_until_cancelled(self) -> str:
        """A body that records when it starts and when it is stopped, and never ends."""
        self.events.append("body started")
        self.started.set()
        try:
            await anyio.sleep_forever()
        finally:
            self.events.append("body stopped")
            self.stopped.set()
        return "unreachable"


@dataclass
class Served:
    url: str
    tasks: Tasks
    probe: Probe


def build_server(tasks: Tasks, probe: Probe) -> MCPServer[Any]:
    """Three task tools: one to poll to completion, one input round, one to cancel."""
    mcp: MCPServer[Any] = MCPServer(
        "interop", extensions=[tasks.extension()], lifespan=tasks.lifespan
    )

    @tasks.tool(mcp, mode="required")
    async def double(n: int, ctx: TaskContext) -> str:
        probe.task_ids.append(str(ctx.task_id))
        await ctx.progress(1, 2, "waiting to be released")
        await probe.release.wait()
        return str(n * 2)

    @tasks.tool(mcp, mode="required")
    async def confirm(item: str, ctx: TaskContext) -> str:
        probe.task_ids.append(str(ctx.task_id))
        answer = await ctx.elicit("confirm", f"Ship {item}?", NOTE_SCHEMA)
        content = answer.get("content")
        note = content.get("note") if isinstance(content, dict) else None
        return f"{item}: {answer.get('action')} ({note})"

    @tasks.tool(mcp, mode="required")
    async def forever(ctx: TaskContext) -> str:
        probe.task_ids.append(str(ctx.task_id))
        return await probe.run_until_cancelled()

    return mcp


def build_fastmcp_server(tasks: Tasks, probe: Probe) -> FastMCP:
    """:func:`build_server`'s tools as FastMCP task tools on our FastMCP extension. A
    FastMCP task body reaches its task through ``current_task_context()`` (FastMCP's own
    ``ctx.elicit`` speaks to the request, which has already been answered)."""
    mcp = FastMCP("interop-fastmcp")
    mcp.add_extension(tasks.fastmcp_extension())
    required = TaskConfig(mode="required")

    def task_context() -> TaskContext:
        ctx = current_task_context()
        assert ctx is not None, "a task tool's body runs in its task's context"
        probe.task_ids.append(str(ctx.task_id))
        return ctx

    @mcp.tool(task=required)
    async def double(n: int) -> str:
        ctx = task_context()
        await ctx.progress(1, 2, "waiting to be released")
        await probe.release.wait()
        return str(n * 2)

    @mcp.tool(task=required)
    async def confirm(item: str) -> str:
        answer = await task_context().elicit("confirm", f"Ship {item}?", NOTE_SCHEMA)
        content = answer.get("content")
        note = content.get("note") if isinstance(content, dict) else None
        return f"{item}: {answer.get('action')} ({note})"

    @mcp.tool(task=required)
    async def forever() -> str:
        task_context()
        return await probe.run_until_cancelled()

    return mcp


@pytest.fixture(params=["memory", "sqlite", "postgres", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Each Store, opened by URL on a real backend; closed (and its namespace dropped)
    afterwards."""
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'tasks.db'}"
    else:
        server = request.getfixturevalue(f"{request.param}_url")
        url = namespaced_url(server, "mcpt_interop_" + secrets.token_hex(6))
    opened = store_from_url(url)
    try:
        yield opened
    finally:
        await opened.close()
        if request.param in ("postgres", "redis"):
            await drop_namespace(url)


@pytest.fixture
def serve(store: Store) -> Callable[..., AbstractAsyncContextManager[Served]]:
    """``async with serve(**tasks_options) as served``: our server on ``store`` over HTTP."""

    @asynccontextmanager
    async def serve(**tasks_options: Any) -> AsyncIterator[Served]:
        tasks = Tasks(store=store, **tasks_options)
        probe = Probe()
        app = build_server(tasks, probe).streamable_http_app()
        async with running_asgi(app) as url:
            yield Served(url, tasks, probe)

    return serve


@pytest.fixture
def serve_fastmcp(store: Store) -> Callable[..., AbstractAsyncContextManager[Served]]:
    """``async with serve_fastmcp(**tasks_options) as served``: the FastMCP server of
    :func:`build_fastmcp_server` on ``store`` over HTTP."""

    @asynccontextmanager
    async def serve(**tasks_options: Any) -> AsyncIterator[Served]:
        tasks = Tasks(store=store, **tasks_options)
        probe = Probe()
        async with running(build_fastmcp_server(tasks, probe)) as url:
            yield Served(url, tasks, probe)

    return serve
