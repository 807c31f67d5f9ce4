"""End to end: a task's TTL never removes it while its body runs, and its result stays
readable after the body ends (S-TTL.1, S-TTL.2), over real HTTP with a manual store clock."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks import ManualClock, MemoryTaskStore, RunnerOptions, TaskContext, Tasks
from mcp_tasks.client import TaskHandle, TaskState, start_tool, tasks_client
from mcp_tasks.testing import running

pytestmark = pytest.mark.anyio

TTL_MS = 1_500


async def terminal_state(handle: TaskHandle) -> TaskState:
    """Poll tasks/get until the task ended (the store clock does not move meanwhile)."""
    with anyio.fail_after(10):
        while True:
            state = await handle.get()
            if state.status in ("completed", "failed", "cancelled"):
                return state
            await anyio.sleep(0.01)


async def test_a_running_task_outlives_its_ttl_and_its_result_stays_readable() -> None:
    """With ttlMs 1 500: tasks/get answers working at 1.0 s and still at 1.7 s (past the TTL)
    while the body runs; the body's result is then readable, also past the original TTL, for
    the result retention, after which the task is gone."""
    clock = ManualClock()
    store = MemoryTaskStore(clock=clock)  # the default result retention: 60 s
    tasks = Tasks(
        store=store, runner=RunnerOptions(reap_interval_s=0.01)
    )  # the reaper runs all along
    started, finish = anyio.Event(), anyio.Event()
    mcp: MCPServer[Any] = MCPServer("ttl", extensions=[tasks.extension()], lifespan=tasks.lifespan)

    @tasks.tool(mcp, mode="required", ttl_ms=TTL_MS)
    async def slow(ctx: TaskContext) -> str:
        started.set()
        await finish.wait()
        return "the result"

    async with running(mcp) as url, tasks_client(url) as client:
        handle = await start_tool(client, "slow", {})
        assert isinstance(handle, TaskHandle)
        with anyio.fail_after(10):
            await started.wait()
        clock.advance(1_000)
        assert (await handle.get()).status == "working"
        clock.advance(700)  # 1.7 s after the start: past the TTL, the body still runs
        await anyio.sleep(0.05)  # let the reaper run at this time
        assert (await handle.get()).status == "working"
        finish.set()
        state = await terminal_state(handle)
        assert state.status == "completed"
        assert state.call_tool_result().content[0].text == "the result"  # type: ignore[union-attr]
        clock.advance(30_000)
        await anyio.sleep(0.05)
        assert (await handle.get()).status == "completed"
        clock.advance(30_001)  # the default result retention (60 s) has passed too
        with pytest.raises(Exception, match="Task not found"):
            await handle.get()
