"""The bounds on open task ``subscriptions/listen`` streams, over real Streamable HTTP: real
streams held open against a served app; past a bound the client gets -32603 "Subscription
limit reached" before any acknowledgment, and a stream the client closes frees its slot."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

import anyio
import httpx2 as httpx
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks import ServingOptions, Tasks
from mcp_tasks.engine.listen_slots import DEFAULT_MAX_LISTEN_STREAMS_PER_OWNER
from mcp_tasks.testing import RawClient, running_asgi, static_auth

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

pytestmark = pytest.mark.anyio

ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
LIMIT_REACHED = {"code": -32603, "message": "Subscription limit reached"}


@asynccontextmanager
async def serving(tasks: Tasks) -> AsyncIterator[tuple[RawClient, RawClient]]:
    """A served app with one tool whose tasks stay working until the server stops, and
    two principals' clients (alice, bob)."""
    mcp: MCPServer[Any] = MCPServer(
        "bounds",
        extensions=[tasks.extension()],
        lifespan=tasks.lifespan,
        **static_auth("alice", "bob"),
    )

    @tasks.tool(mcp, mode="required")
    async def forever() -> str:
        await anyio.sleep_forever()
        return "never"

    app = mcp.streamable_http_app()
    limits = httpx.Limits(max_connections=None)  # every stream holds a connection
    async with running_asgi(app) as url, httpx.AsyncClient(timeout=30, limits=limits) as http:
        yield RawClient(http, url, token="alice"), RawClient(http, url, token="bob")


async def working_task(client: RawClient) -> str:
    reply = await client.call("tools/call", {"name": "forever", "arguments": {}})
    task_id: str = reply["result"]["taskId"]
    return task_id


async def first_message(stack: AsyncExitStack, response: httpx.Response) -> dict[str, Any]:
    """The first JSON-RPC message of a response (an event stream stays open). Its line
    reader is closed by ``stack``, in this task: closing it closes the stream, and one left
    suspended would be finalized later outside any task."""
    if not response.headers.get("content-type", "").startswith("text/event-stream"):
        return cast("dict[str, Any]", json.loads(await response.aread()))
    lines = response.aiter_lines()
    stack.push_async_callback(lines.aclose)
    with anyio.fail_after(30):
        async for line in lines:
            if line.startswith("data: "):
                return cast("dict[str, Any]", json.loads(line[6:]))
    raise AssertionError("the stream ended without a message")


async def listen(
    stack: AsyncExitStack, client: RawClient, task_id: str
) -> tuple[dict[str, Any], httpx.Response]:
    """Open a listen on ``task_id``, kept open by ``stack``: its first message, and the
    response."""
    stream = await stack.enter_async_context(
        client.stream("subscriptions/listen", {"notifications": {"taskIds": [task_id]}})
    )
    return await first_message(stack, stream.response), stream.response


async def open_listen(stack: AsyncExitStack, client: RawClient, task_id: str) -> None:
    """A listen stream on ``task_id``, acknowledged, and kept open by ``stack``."""
    first, _ = await listen(stack, client, task_id)
    assert first.get("method") == ACKNOWLEDGED, first


async def refused(client: RawClient, task_id: str) -> dict[str, Any]:
    """A listen past a bound: its whole response, which is the error and nothing else."""
    async with AsyncExitStack() as stack:
        first, response = await listen(stack, client, task_id)
        with anyio.fail_after(30):
            rest = [line async for line in response.aiter_lines() if line.startswith("data: ")]
    assert rest == [], rest  # no acknowledgment, no notification after the error
    assert first.get("error") == LIMIT_REACHED, first
    return first


async def reopen(held: AsyncExitStack, client: RawClient, task_id: str) -> None:
    """A listen acknowledged (kept open by ``held``) once the server has seen a closed
    stream go, a moment after the client closed it; until then the same refusal."""
    with anyio.fail_after(10):
        while True:
            first, _ = await listen(held, client, task_id)
            if first.get("method") == ACKNOWLEDGED:
                return
            assert first.get("error") == LIMIT_REACHED, first
            await anyio.sleep(0.05)


async def test_a_principal_past_its_default_bound_is_refused_until_it_closes_one() -> None:
    """Alice holds 16 open streams (the default per principal); her 17th is answered
    -32603 "Subscription limit reached" and nothing else, while bob still gets one; once
    alice closes one stream her next listen is acknowledged."""
    async with serving(Tasks()) as (alice, bob):
        mine, theirs = await working_task(alice), await working_task(bob)
        async with AsyncExitStack() as held:
            first = AsyncExitStack()
            await open_listen(first, alice, mine)
            for _ in range(DEFAULT_MAX_LISTEN_STREAMS_PER_OWNER - 1):
                await open_listen(held, alice, mine)
            await refused(alice, mine)
            await open_listen(held, bob, theirs)
            await first.aclose()  # the client closes the stream: the server frees its slot
            await reopen(held, alice, mine)


async def test_the_process_bound_holds_across_principals() -> None:
    """With ``max_listen_streams=3``: alice's two and bob's one fill the process; bob's
    second is refused with the same error though he holds only one; once alice closes
    one, bob's is acknowledged."""
    async with serving(Tasks(serving=ServingOptions(max_listen_streams=3))) as (alice, bob):
        mine, theirs = await working_task(alice), await working_task(bob)
        async with AsyncExitStack() as held:
            first = AsyncExitStack()
            await open_listen(first, alice, mine)
            await open_listen(held, alice, mine)
            await open_listen(held, bob, theirs)
            await refused(bob, theirs)
            await first.aclose()
            await reopen(held, bob, theirs)
