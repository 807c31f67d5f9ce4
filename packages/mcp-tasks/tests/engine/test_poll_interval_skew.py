"""Adaptive poll hints when the engine's clock and the store's clock disagree."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import pytest
from mcp_types import CallToolResult

from mcp_tasks import ManualClock, MemoryTaskStore, RequestView, Tasks
from mcp_tasks.engine import ToolOptions
from mcp_tasks.engine.wire import MIN_POLL_INTERVAL_MS

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

pytestmark = pytest.mark.anyio

EXT: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
CONFIGURED_MS = 5_000
TEN_MINUTES_MS = 600_000


class SkewedNode:
    """An engine whose clock is ``skew_ms`` ahead of its store's clock (negative: behind)."""

    def __init__(self, skew_ms: int) -> None:
        self.store_clock = ManualClock()
        self.engine_clock = ManualClock(self.store_clock.now_ms + skew_ms)
        self.tasks = Tasks(store=MemoryTaskStore(clock=self.store_clock), clock=self.engine_clock)
        self.release = anyio.Event()

    def advance(self, ms: int) -> None:
        self.store_clock.advance(ms)
        self.engine_clock.advance(ms)

    async def create(self) -> dict[str, Any]:
        async def body() -> CallToolResult:
            await self.release.wait()  # stays working while the test polls
            return CallToolResult(content=[])

        created: dict[str, Any] = await self.tasks.engine.handle_tool_call(
            RequestView(protocol_version="2026-07-28", client_capabilities=EXT),
            name="slow",
            arguments={},
            input_responses=None,
            call_next=body,
            options=ToolOptions(poll_interval_ms=CONFIGURED_MS),
        )
        return created

    async def poll_hint(self, task_id: str) -> int:
        got = await self.tasks.engine.handle_tasks_method(
            RequestView(protocol_version="2026-07-28", client_capabilities=EXT),
            "tasks/get",
            {"taskId": task_id},
        )
        assert got["status"] == "working"
        hint: int = got["pollIntervalMs"]
        return hint


@pytest.fixture(params=[TEN_MINUTES_MS, -TEN_MINUTES_MS], ids=["engine-ahead", "engine-behind"])
async def node(request: pytest.FixtureRequest) -> AsyncIterator[SkewedNode]:
    skewed = SkewedNode(request.param)
    async with skewed.tasks.running():
        yield skewed
        skewed.release.set()


async def test_a_young_task_gets_the_short_hint_despite_skew(node: SkewedNode) -> None:
    """Ten minutes of skew either way: a task just created is hinted as young, on create
    and on the first tasks/get, not as ten minutes old (or as not yet born)."""
    created = await node.create()
    assert created["pollIntervalMs"] == MIN_POLL_INTERVAL_MS
    assert await node.poll_hint(created["taskId"]) == MIN_POLL_INTERVAL_MS


async def test_an_older_task_grows_toward_its_interval_despite_skew(node: SkewedNode) -> None:
    """After 4 s on both clocks a task is hinted as 4 s old (half its age), and after a
    minute it gets its configured interval, whichever way the clocks disagree."""
    created = await node.create()
    node.advance(4_000)
    assert await node.poll_hint(created["taskId"]) == 2_000
    node.advance(60_000)
    assert await node.poll_hint(created["taskId"]) == CONFIGURED_MS
