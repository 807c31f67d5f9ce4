"""`Tasks` left to choose its notifier hears other processes on its store: a change another
`Tasks` on the same SQLite file makes is pushed to this one's listen stream."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx2 as httpx
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks import RequestView, TaskContext, Tasks
from mcp_tasks.engine import task_watch
from mcp_tasks.runtime import notifier
from mcp_tasks.testing import PROTOCOL, WITH_TASKS, RawClient, running_asgi

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio


async def test_a_change_made_by_another_tasks_on_the_store_is_pushed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two Tasks on one SQLite file, each with the notifier it picks itself (each as a
    process of its own would have): the other one cancels a task, and this one's listen
    stream sends the cancel. The re-read fallback is an hour here, so only a signal from
    the other side can deliver it."""
    monkeypatch.setattr(task_watch, "POLL_FALLBACK_S", 3600.0)
    monkeypatch.setattr(notifier, "POLL_FALLBACK_S", 3600.0)
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    serving, other = Tasks(store=url), Tasks(store=url)
    mcp: MCPServer[Any] = MCPServer(
        "default-notifier", extensions=[serving.extension()], lifespan=serving.lifespan
    )

    @serving.tool(mcp, mode="required")
    async def ask(ctx: TaskContext) -> str:
        return json.dumps(await ctx.elicit("name", "Name?"))

    request = RequestView(protocol_version=PROTOCOL, client_capabilities=WITH_TASKS)
    async with (
        other.running(),
        running_asgi(mcp.streamable_http_app()) as address,
        httpx.AsyncClient(timeout=30) as http,
    ):
        client = RawClient(http, address)
        created = await client.call("tools/call", {"name": "ask", "arguments": {}})
        task_id = created["result"]["taskId"]
        async with client.stream(
            "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}
        ) as stream:
            statuses = []
            while (message := await stream.next(timeout_s=10)) is not None:
                if message.get("method") != "notifications/tasks":
                    continue
                statuses.append(message["params"]["status"])
                if message["params"]["status"] == "input_required":
                    await other.engine.handle_tasks_method(
                        request, "tasks/cancel", {"taskId": task_id}
                    )
    assert statuses[-2:] == ["input_required", "cancelled"]
