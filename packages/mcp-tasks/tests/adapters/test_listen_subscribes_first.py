"""``subscriptions/listen`` subscribes to its tasks before it reads them, so a change made
between the read and the first wait is pushed at once, not left to the 2 s re-read."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio
import httpx2 as httpx
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks import MemoryTaskStore, TaskContext, Tasks
from mcp_tasks.domain.rules import ANY_OWNER
from mcp_tasks.engine import task_watch
from mcp_tasks.runtime import notifier
from mcp_tasks.testing import RawClient, running_asgi

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from mcp_tasks.domain.models import TaskRecord

pytestmark = pytest.mark.anyio


class ChangedRightAfterARead(MemoryTaskStore):
    """A memory store that, once armed, makes a change right after the next read made for
    a caller (not the runner's own reads): the interleaving a listen must survive."""

    change: Callable[[str], Awaitable[None]] | None = None

    async def get(self, task_id: str, owner: Any) -> TaskRecord:
        record = await super().get(task_id, owner)
        change, self.change = self.change, None
        if change is not None and owner is not ANY_OWNER:
            await change(task_id)
        elif change is not None:
            self.change = change
        return record


async def test_a_change_between_the_read_and_the_wait_is_pushed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The task is cancelled right after the listen has read it (still input_required):
    the stream sends input_required, then cancelled, and ends. The re-read fallback is an
    hour here, so only the change's own signal can deliver it."""
    monkeypatch.setattr(task_watch, "POLL_FALLBACK_S", 3600.0)
    monkeypatch.setattr(notifier, "POLL_FALLBACK_S", 3600.0)
    store = ChangedRightAfterARead()
    tasks = Tasks(store=store)
    mcp: MCPServer[Any] = MCPServer(
        "listen-order", extensions=[tasks.extension()], lifespan=tasks.lifespan
    )

    @tasks.tool(mcp, mode="required")
    async def ask(ctx: TaskContext) -> str:
        return json.dumps(await ctx.elicit("name", "Name?"))

    async def cancel(task_id: str) -> None:
        await MemoryTaskStore.cancel(store, task_id, None)
        await tasks.notifier.publish(task_id)

    async with (
        running_asgi(mcp.streamable_http_app()) as url,
        httpx.AsyncClient(timeout=30) as http,
    ):
        client = RawClient(http, url)
        created = await client.call("tools/call", {"name": "ask", "arguments": {}})
        task_id = created["result"]["taskId"]
        with anyio.fail_after(10):
            while True:
                got = await client.call("tasks/get", {"taskId": task_id})
                if got["result"]["status"] == "input_required":
                    break
                await anyio.sleep(0.02)
        store.change = cancel
        async with client.stream(
            "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}
        ) as stream:
            ack = await stream.next(timeout_s=10)
            assert ack is not None
            assert ack["params"]["notifications"]["taskIds"] == [task_id]
            statuses = []
            while (message := await stream.next(timeout_s=10)) is not None:
                if message.get("method") == "notifications/tasks":
                    statuses.append(message["params"]["status"])
        assert store.change is None  # the change was made, after the listen's read
    assert statuses == ["input_required", "cancelled"]
