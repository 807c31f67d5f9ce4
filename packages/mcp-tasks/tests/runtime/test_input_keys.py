"""An input key asked again: the same request is a replay (its answer), a different request
is the body's mistake (an error, and the new question is never sent)."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio
import httpx2 as httpx
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks import (
    LocalNotifier,
    MemoryTaskStore,
    NewTask,
    Retry,
    TaskContext,
    Tasks,
)
from mcp_tasks.domain.errors import MCPTasksError
from mcp_tasks.domain.rules import ANY_OWNER
from mcp_tasks.runtime.context import RunningTaskContext, retry_error
from mcp_tasks.runtime.runner import tool_work
from mcp_tasks.stores.encrypted import Keyring, encrypting, new_key
from mcp_tasks.testing import RawClient, running_asgi
from mcp_tasks_sqlite import SQLiteTaskStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from mcp_tasks.domain.models import Lease
    from mcp_tasks.stores.protocol import Store

pytestmark = pytest.mark.anyio

TASK_ID = "input-keys-task-000000000000000000000000000"
REUSED = "Input key 'k' was asked before with a different request; a new question needs a new key"
CAPS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}}
YES = {"action": "accept", "content": {"v": "first answer"}}


@pytest.fixture(params=["memory", "sqlite", "memory encrypted", "sqlite encrypted"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Each store, and each sealing what the tasks carry (the digests of the questions it
    keeps are of sealed ones: a replay must still be told from a new question)."""
    keys = Keyring.parse(f"k:{new_key()}") if request.param.endswith("encrypted") else None
    if request.param.startswith("memory"):
        yield encrypting(MemoryTaskStore(), keys)
        return
    sqlite = SQLiteTaskStore(tmp_path / "tasks.db")
    try:
        yield encrypting(sqlite, keys)
    finally:
        await sqlite.close()


NOTIFIER = LocalNotifier()


async def claimed_context(store: Store) -> RunningTaskContext:
    await store.create(NewTask(task_id=TASK_ID, work=tool_work("t", {}), client_capabilities=CAPS))
    claimed = await store.claim("w", lease_ms=60_000, task_id=TASK_ID)
    assert claimed is not None
    return running(store, claimed.lease)


def running(store: Store, lease: Lease) -> RunningTaskContext:
    """The context of the attempt holding ``lease``."""
    return RunningTaskContext(
        task_id=TASK_ID, store=store, notifier=NOTIFIER, lease=lease, client_capabilities=CAPS
    )


async def answer_when_asked(
    store: Store, key: str, answer: dict[str, Any], *, task_status: Any = anyio.TASK_STATUS_IGNORED
) -> None:
    """Answer ``key`` once the body asks it (woken by the context's change signal)."""
    async with NOTIFIER.subscribe(TASK_ID) as changes:
        task_status.started()
        with anyio.fail_after(10):
            while key not in (await store.get(TASK_ID, ANY_OWNER)).input_requests:
                await changes.wait(5.0)
    await store.update(TASK_ID, None, {key: answer})
    await NOTIFIER.publish(TASK_ID)


async def test_a_key_asked_with_a_different_request_raises_and_is_never_sent(store: Store) -> None:
    """``elicit("k", "First?")`` then ``elicit("k", "Different?")``: the second raises
    InputKeyReused (no task id in it) and writes nothing; the stale answer is not returned."""
    context = await claimed_context(store)
    async with anyio.create_task_group() as tg:
        await tg.start(answer_when_asked, store, "k", YES)
        with anyio.fail_after(10):
            first = await context.elicit("k", "First?")
    assert first == YES
    before = await store.get(TASK_ID, ANY_OWNER)
    with pytest.raises(MCPTasksError) as caught:  # InputKeyReused (new on this branch)
        await context.elicit("k", "Different?")
    assert type(caught.value).__name__ == "InputKeyReused"
    assert str(caught.value) == REUSED
    assert TASK_ID not in str(caught.value)
    after = await store.get(TASK_ID, ANY_OWNER)
    assert after.revision == before.revision
    assert after.input_requests == {}


async def test_the_same_request_under_the_same_key_is_a_replay(store: Store) -> None:
    """The same key with an identical request (e.g. after a re-run) returns the stored
    answer at once, writing nothing."""
    context = await claimed_context(store)
    async with anyio.create_task_group() as tg:
        await tg.start(answer_when_asked, store, "k", YES)
        with anyio.fail_after(10):
            await context.elicit("k", "First?")
    revision = (await store.get(TASK_ID, ANY_OWNER)).revision
    with anyio.fail_after(10):
        assert await context.elicit("k", "First?") == YES
    assert (await store.get(TASK_ID, ANY_OWNER)).revision == revision


async def test_a_question_a_retry_left_unanswered_is_asked_again_by_the_next_attempt(
    store: Store,
) -> None:
    """A body gives up waiting for "k" and asks for a retry (``ctx.retry`` after its own
    timeout): the next attempt's ``elicit("k", ...)`` asks again, the client sees the
    question and its answer reaches the body; never an endless wait for a question nobody
    sees any more."""
    await store.create(
        NewTask(
            task_id=TASK_ID,
            work=replace(tool_work("t", {}), retry_delays_ms=(0,)),
            client_capabilities=CAPS,
        )
    )
    first = await store.claim("w", lease_ms=60_000, task_id=TASK_ID)
    assert first is not None
    attempt = running(store, first.lease)
    async with anyio.create_task_group() as tg, NOTIFIER.subscribe(TASK_ID) as changes:
        tg.start_soon(attempt.elicit, "k", "First?")
        with anyio.fail_after(10):
            while "k" not in (await store.get(TASK_ID, ANY_OWNER)).input_requests:
                await changes.wait(5.0)
        tg.cancel_scope.cancel()  # the body's own timeout
    await store.put_status(TASK_ID, Retry(retry_error("nobody answered")), lease=first.lease)
    assert (await store.get(TASK_ID, ANY_OWNER)).input_requests == {}
    second = await store.claim("w", lease_ms=60_000, task_id=TASK_ID)
    assert second is not None
    rerun = RunningTaskContext(
        task_id=TASK_ID,
        store=store,
        notifier=NOTIFIER,
        lease=second.lease,
        client_capabilities=CAPS,
    )
    async with anyio.create_task_group() as tg:
        await tg.start(answer_when_asked, store, "k", YES)
        with anyio.fail_after(10):
            assert await rerun.elicit("k", "First?") == YES


# --- over HTTP: the task fails, the second question never reaches the client -------------


def build(tasks: Tasks) -> MCPServer[Any]:
    mcp: MCPServer[Any] = MCPServer("keys", extensions=[tasks.extension()], lifespan=tasks.lifespan)

    @tasks.tool(mcp, mode="required")
    async def twice(ctx: TaskContext) -> str:
        first = await ctx.elicit("k", "First?")
        second = await ctx.elicit("k", "Different?")
        return json.dumps([first, second])

    @tasks.tool(mcp, mode="forbidden")
    async def twice_now(ctx: TaskContext) -> str:
        first = await ctx.elicit("k", "First?")
        second = await ctx.elicit("k", "Different?")
        return json.dumps([first, second])

    return mcp


@asynccontextmanager
async def client() -> AsyncIterator[RawClient]:
    async with (
        running_asgi(build(Tasks()).streamable_http_app()) as url,
        httpx.AsyncClient(timeout=10) as http,
    ):
        yield RawClient(http, url)


async def test_over_http_a_reused_key_fails_the_task() -> None:
    """The task fails -32603 with the reuse message; tasks/get never shows "Different?"."""
    async with client() as raw:
        created = (await raw.call("tools/call", {"name": "twice"}, capabilities=CAPS))["result"]
        task_id = created["taskId"]
        seen: list[dict[str, Any]] = []
        with anyio.fail_after(10):
            while True:
                got = (await raw.call("tasks/get", {"taskId": task_id}, capabilities=CAPS))[
                    "result"
                ]
                seen.append(got)
                if got["status"] == "input_required":
                    break
                await anyio.sleep(0.02)
        assert got["inputRequests"]["k"]["params"]["message"] == "First?"
        await raw.call(
            "tasks/update", {"taskId": task_id, "inputResponses": {"k": YES}}, capabilities=CAPS
        )
        with anyio.fail_after(10):
            while True:
                got = (await raw.call("tasks/get", {"taskId": task_id}, capabilities=CAPS))[
                    "result"
                ]
                seen.append(got)
                if got["status"] in ("completed", "failed"):
                    break
                await anyio.sleep(0.02)
    assert got["status"] == "failed"
    assert got["error"] == {"code": -32603, "message": REUSED}
    assert "Different?" not in json.dumps(seen)


async def test_over_http_a_synchronous_call_refuses_a_reused_key_too() -> None:
    """The synchronous (multi-round-trip) path: round 1 asks "First?"; the round that brings
    its answer runs the body again, which then asks "k" differently: -32603, not the stale
    answer, and "Different?" is never sent."""
    async with client() as raw:
        first = (await raw.call("tools/call", {"name": "twice_now"}, capabilities=CAPS))["result"]
        assert first["resultType"] == "input_required"
        assert list(first["inputRequests"]) == ["k"]
        assert first["inputRequests"]["k"]["params"]["message"] == "First?"
        second = await raw.call(
            "tools/call", {"name": "twice_now", "inputResponses": {"k": YES}}, capabilities=CAPS
        )
    assert second["error"] == {"code": -32603, "message": REUSED}


async def test_inline_context_replays_an_identical_request_and_refuses_another() -> None:
    """The inline context: an answered key asked again identically returns the answer; the
    same key with another request raises InputKeyReused."""
    from mcp_tasks import InputKeyReused  # noqa: PLC0415 (new on this branch)
    from mcp_tasks.runtime.context import InlineTaskContext, InputRequired  # noqa: PLC0415

    context = InlineTaskContext(input_responses={"k": YES}, client_capabilities=CAPS)
    assert await context.elicit("k", "First?") == YES
    assert await context.elicit("k", "First?") == YES
    with pytest.raises(InputKeyReused):
        await context.elicit("k", "Different?")
    fresh = InlineTaskContext(client_capabilities=CAPS)
    with pytest.raises(InputRequired):
        await fresh.elicit("k", "First?")
    with pytest.raises(InputKeyReused):
        await fresh.elicit("k", "Different?")
    assert list(fresh.pending) == ["k"]
    assert fresh.pending["k"]["params"]["message"] == "First?"  # type: ignore[index,call-overload]
