"""Task listen streams are bounded per principal and per process: past either bound a
listen is refused with -32603 "Subscription limit reached" (the SDK's own answer past its
limit) before it watches anything, and a stream that ends gives its slot back."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from mcp_tasks import RequestView, ServingOptions, Tasks
from mcp_tasks.engine.listen_slots import (
    DEFAULT_MAX_LISTEN_STREAMS,
    DEFAULT_MAX_LISTEN_STREAMS_PER_OWNER,
    ListenSlots,
)
from mcp_tasks.engine.task_watch import watch_tasks

pytestmark = pytest.mark.anyio

TASKS_CAPS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def caller(owner: str | None) -> RequestView:
    return RequestView(protocol_version="2026-07-28", client_capabilities=TASKS_CAPS, owner=owner)


def test_the_defaults() -> None:
    """1,024 streams per process (as the SDK's own listen handler) and 16 per principal."""
    slots = Tasks().engine.listen_slots
    assert (slots.total, slots.per_owner) == (1_024, 16)
    assert (DEFAULT_MAX_LISTEN_STREAMS, DEFAULT_MAX_LISTEN_STREAMS_PER_OWNER) == (1_024, 16)
    with pytest.raises(ValueError, match="positive"):
        ListenSlots(0, 1)


async def test_past_either_bound_a_listen_is_refused_until_a_stream_ends() -> None:
    """Per principal 2, per process 3: alice's third watch is refused, then bob's second
    once three are open (unauthenticated callers count as one principal); ending one of
    alice's watches lets bob's through."""
    tasks = Tasks(serving=ServingOptions(max_listen_streams=3, max_listen_streams_per_owner=2))
    engine = tasks.engine
    alice, bob = caller('["i","c","alice"]'), caller('["i","c","bob"]')
    async with AsyncExitStack() as held:
        first = AsyncExitStack()
        await first.enter_async_context(watch_tasks(engine, alice, ["some-task"]))
        await held.enter_async_context(watch_tasks(engine, alice, ["some-task"]))
        with pytest.raises(MCPError) as refused:
            await held.enter_async_context(watch_tasks(engine, alice, ["some-task"]))
        assert (refused.value.error.code, refused.value.error.message) == (
            -32603,
            "Subscription limit reached",
        )
        await held.enter_async_context(watch_tasks(engine, bob, ["some-task"]))
        assert engine.listen_slots.open == 3
        with pytest.raises(MCPError, match="Subscription limit reached"):
            await held.enter_async_context(watch_tasks(engine, bob, ["other-task"]))
        await first.aclose()
        await held.enter_async_context(watch_tasks(engine, bob, ["other-task"]))
        assert engine.listen_slots.open == 3
    assert engine.listen_slots.open == 0
