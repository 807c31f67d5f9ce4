"""Idle listen streams and input waits cost the store nothing while its notifier listens: on
every durable store, :data:`STREAMS` tasks wait for input, each with a ``subscriptions/listen``
stream open on it, and over several poll fallbacks nothing reads the store; a change still
reaches its stream, through its signal."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

import anyio
import httpx2 as httpx
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks import RelayNotifier, TaskContext, Tasks
from mcp_tasks.engine.listen_slots import DEFAULT_MAX_LISTEN_STREAMS_PER_OWNER
from mcp_tasks.runtime import notifier
from mcp_tasks.runtime.notifier import POLL_FALLBACK_S
from mcp_tasks.testing import RawClient, running_asgi

if TYPE_CHECKING:
    from mcp_tasks.domain.models import TaskRecord
    from mcp_tasks.domain.rules import OwnerArg
    from mcp_tasks.testing import MessageStream

pytestmark = pytest.mark.anyio

#: As many as one caller may open (the anonymous caller here: every stream is its).
STREAMS = DEFAULT_MAX_LISTEN_STREAMS_PER_OWNER
#: Three poll fallbacks: a stream or a wait that still polled would read in each.
IDLE_S = 3 * POLL_FALLBACK_S
#: A failure bound for what is awaited (load included), not a speed check.
BOUND_S = 30


def asking_server(store_url: str) -> tuple[Tasks, MCPServer[Any]]:
    """Tasks on ``store_url`` and a server whose one tool's body waits for an answer."""
    tasks = Tasks(store=store_url, close_store=True)
    mcp: MCPServer[Any] = MCPServer("idle", extensions=[tasks.extension()], lifespan=tasks.lifespan)

    @tasks.tool(mcp, mode="required")
    async def ask(ctx: TaskContext) -> str:
        return json.dumps(await ctx.elicit("name", "Name?"))

    return tasks, mcp


async def status_of(stream: MessageStream) -> str:
    message = await stream.next(timeout_s=BOUND_S)
    assert message is not None, "the stream ended"
    assert message.get("method") == "notifications/tasks", message
    status: str = message["params"]["status"]
    return status


async def test_idle_streams_and_input_waits_read_nothing(store_url: str) -> None:
    """``STREAMS`` bodies wait for input and a listen stream is open on each task: over
    ``IDLE_S`` the store is read not once (each read of the store counted); a cancel of one
    task then reaches its stream."""
    tasks, mcp = asking_server(store_url)
    reads = 0
    get = tasks.store.get

    async def counted(task_id: str, owner: OwnerArg) -> TaskRecord:
        nonlocal reads
        reads += 1
        return await get(task_id, owner)

    tasks.store.get = counted  # type: ignore[method-assign]
    async with (
        running_asgi(mcp.streamable_http_app()) as url,
        httpx.AsyncClient(timeout=BOUND_S) as http,
        AsyncExitStack() as stack,
    ):
        client = RawClient(http, url)
        task_ids = []
        for _ in range(STREAMS):
            created = await client.call("tools/call", {"name": "ask", "arguments": {}})
            task_ids.append(created["result"]["taskId"])
        streams = []
        for task_id in task_ids:
            with anyio.fail_after(BOUND_S):  # the body asked: it waits for the answer
                while (await client.call("tasks/get", {"taskId": task_id}))["result"][  # noqa: ASYNC110
                    "status"
                ] != "input_required":
                    await anyio.sleep(0.02)
            stream = await stack.enter_async_context(
                client.stream("subscriptions/listen", {"notifications": {"taskIds": [task_id]}})
            )
            ack = await stream.next(timeout_s=BOUND_S)
            assert ack is not None, "no acknowledgment"
            assert "error" not in ack, ack
            assert await status_of(stream) == "input_required"
            streams.append(stream)
        relay = tasks.notifier.inner
        assert isinstance(relay, RelayNotifier)
        assert relay.complete(), "the store's notifier does not listen"
        before = reads
        await anyio.sleep(IDLE_S)
        assert reads == before, f"{reads - before} store reads in {IDLE_S:g} s while idle"
        cancelled = await client.call("tasks/cancel", {"taskId": task_ids[0]})
        assert "result" in cancelled, cancelled
        assert await status_of(streams[0]) == "cancelled"


async def test_a_write_that_sent_no_signal_reaches_its_stream_at_the_listening_fallback(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task cancelled straight through a Store handle (no signal: as a process that died
    between its write and its signal leaves it) reaches the task's listen stream at the
    next re-read while the relay listens (:data:`LISTENING_FALLBACK_S`, 1 s here; on SQLite
    the file's data version tells at once)."""
    monkeypatch.setattr(notifier, "LISTENING_FALLBACK_S", 1.0)
    tasks, mcp = asking_server(store_url)
    async with (
        running_asgi(mcp.streamable_http_app()) as url,
        httpx.AsyncClient(timeout=BOUND_S) as http,
    ):
        client = RawClient(http, url)
        created = await client.call("tools/call", {"name": "ask", "arguments": {}})
        task_id = created["result"]["taskId"]
        async with client.stream(
            "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}
        ) as stream:
            ack = await stream.next(timeout_s=BOUND_S)
            assert ack is not None, "no acknowledgment"
            assert "error" not in ack, ack
            relay = tasks.notifier.inner
            assert isinstance(relay, RelayNotifier)
            with anyio.fail_after(BOUND_S):
                while not relay.complete():  # noqa: ASYNC110 (a state, not an event)
                    await anyio.sleep(0.02)
            await tasks.store.cancel(task_id, None)  # no publish: nothing signals it
            while (status := await status_of(stream)) != "cancelled":
                assert status in ("working", "input_required"), status
