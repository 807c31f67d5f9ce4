"""`mcp-tasks call` rides out a blip of the server's task store: a real Redis behind a TCP
proxy the test stops for a few seconds just as the CLI sends its `--answer`. The server
answers -32603 "Task store unavailable"; the CLI retries within `--reconnect-for`, sends
the answer again once the store is back, and the body gets it exactly once."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from resend_scenarios import DroppingProxy, through

from mcp_tasks import StoreOptions, TaskContext, Tasks
from mcp_tasks.adapters.asgi import asgi_app
from mcp_tasks.testing import running_asgi
from mcp_tasks_redis import RedisTaskStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping

    from anyio.abc import TaskGroup

    Scope = MutableMapping[str, Any]
    Message = MutableMapping[str, Any]
    Receive = Callable[[], Awaitable[Message]]
    Send = Callable[[Message], Awaitable[None]]

pytestmark = pytest.mark.anyio

#: How long the store is away: several of the CLI's retries, well within the lease.
BLIP_S = 3.0
ASKED: dict[str, Any] = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
}


@pytest.fixture
async def proxy(redis_url: str) -> AsyncIterator[DroppingProxy]:
    parts = urlsplit(redis_url)
    assert parts.hostname is not None
    proxy = DroppingProxy(parts.hostname, parts.port or 6379)  # never armed: it forwards
    await proxy.start()
    yield proxy
    await proxy.close()


class StoreAwayAtFirstAnswer:
    """ASGI middleware: the first `tasks/update` finds the store gone (the proxy is closed
    before the request goes on), and the store comes back `BLIP_S` later."""

    def __init__(self, app: Any, proxy: DroppingProxy, group: TaskGroup) -> None:
        self.app, self.proxy, self.group = app, proxy, group
        self.updates = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        if body and json.loads(body).get("method") == "tasks/update":
            self.updates += 1
            if self.updates == 1:
                await self.proxy.close()
                self.group.start_soon(self._back_later)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _back_later(self) -> None:
        await anyio.sleep(BLIP_S)
        await self.proxy.start()


async def test_call_rides_out_a_store_blip_and_the_body_gets_the_answer_once(
    redis_url: str, namespace: str, proxy: DroppingProxy, open_store: Any
) -> None:
    """(`open_store` drops the test's prefix afterwards.) The CLI exits 0 with the
    result; it said the store was unavailable and back; its answer was sent again after
    the blip and reached the body once."""
    answers: list[dict[str, Any]] = []
    store = RedisTaskStore(through(redis_url, proxy), StoreOptions(), prefix=namespace)
    tasks = Tasks(store=store, close_store=True)
    mcp = MCPServer("blip", extensions=[tasks.extension()], lifespan=tasks.lifespan)

    @tasks.tool(mcp, mode="required", poll_interval_ms=100)
    async def confirm(ctx: TaskContext) -> str:
        answers.append(await ctx.elicit("ok", "Go on?", ASKED))
        return "went on"

    with anyio.fail_after(90):
        async with anyio.create_task_group() as group:
            app = StoreAwayAtFirstAnswer(asgi_app(mcp), proxy, group)
            async with running_asgi(app) as url:
                done = await anyio.run_process(
                    [
                        sys.executable,
                        "-m",
                        "mcp_tasks.cli",
                        "call",
                        url,
                        "confirm",
                        "--answer",
                        'ok={"ok": true}',
                        "--reconnect-for",
                        "60",
                    ],
                    check=False,
                )
    err = done.stderr.decode()
    assert done.returncode == 0, err
    assert done.stdout == b"went on\n"
    assert "mcp-tasks call: the server's task store is unavailable (error -32603: " in err
    assert "mcp-tasks call: the server's task store is back" in err
    assert app.updates >= 2, "the answer was sent again"
    assert answers == [{"action": "accept", "content": {"ok": True}}]
