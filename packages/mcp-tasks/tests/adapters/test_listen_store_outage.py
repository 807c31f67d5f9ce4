"""``subscriptions/listen`` through a store outage: a stream whose re-read the store does not
answer goes on and sends the task's state once the store is back (the outage said once,
no traceback); a listen begun while the store is away answers -32603."""

from __future__ import annotations

import json
import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import httpx2 as httpx
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks import MemoryTaskStore, StoreUnavailable, TaskContext, Tasks
from mcp_tasks.domain.rules import ANY_OWNER
from mcp_tasks.engine import task_watch
from mcp_tasks.testing import RawClient, running_asgi

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mcp_tasks.domain.models import TaskRecord

pytestmark = pytest.mark.anyio


class AwayForCallers(MemoryTaskStore):
    """A memory store that, while :attr:`away`, fails a caller's reads (not the runner's
    own) as a store that does not answer does."""

    away = False

    async def get(self, task_id: str, owner: Any) -> TaskRecord:
        if self.away and owner is not ANY_OWNER:
            raise StoreUnavailable from ConnectionRefusedError("connection refused")
        return await super().get(task_id, owner)


@asynccontextmanager
async def asking_task(store: AwayForCallers) -> AsyncIterator[tuple[Tasks, RawClient, str]]:
    tasks = Tasks(store=store)
    mcp: MCPServer[Any] = MCPServer(
        "outage", extensions=[tasks.extension()], lifespan=tasks.lifespan
    )

    @tasks.tool(mcp, mode="required")
    async def ask(ctx: TaskContext) -> str:
        return json.dumps(await ctx.elicit("name", "Name?"))

    async with (
        running_asgi(mcp.streamable_http_app()) as url,
        httpx.AsyncClient(timeout=30) as http,
    ):
        client = RawClient(http, url)
        created = await client.call("tools/call", {"name": "ask", "arguments": {}})
        task_id = created["result"]["taskId"]
        with anyio.fail_after(10):
            while (await client.call("tasks/get", {"taskId": task_id}))["result"][  # noqa: ASYNC110
                "status"
            ] != "input_required":
                await anyio.sleep(0.02)
        yield tasks, client, task_id


async def test_a_stream_rides_out_a_store_outage_and_sends_the_change_once_it_is_back(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The task is cancelled while the store fails the stream's reads: the stream goes on,
    sends ``cancelled`` once the store is back, and ends; the log has one WARNING and one
    INFO for the outage, and no ERROR."""
    monkeypatch.setattr(task_watch, "POLL_FALLBACK_S", 0.2)
    caplog.set_level(logging.INFO)
    store = AwayForCallers()
    async with (
        asking_task(store) as (tasks, client, task_id),
        client.stream("subscriptions/listen", {"notifications": {"taskIds": [task_id]}}) as stream,
    ):
        assert await stream.next(timeout_s=10) is not None  # the acknowledgment
        first = await stream.next(timeout_s=10)
        assert first is not None
        assert first["params"]["status"] == "input_required"
        store.away = True
        await MemoryTaskStore.cancel(store, task_id, None)
        await tasks.notifier.publish(task_id)
        await anyio.sleep(1.0)  # several re-reads fail meanwhile
        store.away = False
        rest = []
        while (message := await stream.next(timeout_s=10)) is not None:
            rest.append(message)
    assert [m["params"]["status"] for m in rest if m.get("method") == "notifications/tasks"] == [
        "cancelled"
    ]
    assert [m for m in rest if "error" in m] == []
    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.INFO]
    listen = [(level, text) for level, text in said if text.startswith("subscriptions/listen ")]
    assert [level for level, _ in listen] == ["WARNING", "INFO"], said
    assert "the task store memory:// is unavailable (ConnectionRefusedError" in listen[0][1]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info], said


async def test_a_listen_begun_while_the_store_is_away_answers_32603() -> None:
    """The store fails the listen's first read: the request answers -32603 "Task store
    unavailable", as ``tasks/get`` does."""
    store = AwayForCallers()
    async with asking_task(store) as (_tasks, client, task_id):
        store.away = True
        answer = await client.call(
            "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}
        )
        store.away = False
    assert answer["error"]["code"] == -32603
    assert answer["error"]["message"] == "Task store unavailable"
