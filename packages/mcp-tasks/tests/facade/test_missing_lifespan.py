"""A server built without ``lifespan=tasks.lifespan``: a call that would become a task says
exactly what to add, in its error and (once) in the log."""

from __future__ import annotations

import logging

import pytest
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from mcp_tasks import MemoryTaskStore, Tasks
from mcp_tasks.engine.core import NOT_RUNNING_MESSAGE
from mcp_tasks.testing import running, start_tool, tasks_client

pytestmark = pytest.mark.anyio


async def test_a_task_call_without_the_lifespan_names_the_lifespan_to_add(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tasks = Tasks(store=MemoryTaskStore())
    mcp = MCPServer("forgot", extensions=[tasks.extension()])  # no lifespan=tasks.lifespan

    @tasks.tool(mcp, mode="required")
    async def echo(text: str) -> str:
        return text

    caplog.set_level(logging.ERROR, logger="mcp_tasks.engine.core")
    async with running(mcp) as url, tasks_client(url) as client:
        for _ in range(2):
            with pytest.raises(MCPError) as refused:
                await start_tool(client, "echo", {"text": "hi"})
            assert refused.value.error.code == -32603
            assert refused.value.error.message == NOT_RUNNING_MESSAGE
    assert "lifespan=tasks.lifespan" in NOT_RUNNING_MESSAGE
    assert "tasks.running()" in NOT_RUNNING_MESSAGE
    logged = [r.getMessage() for r in caplog.records if r.name == "mcp_tasks.engine.core"]
    assert logged == [f"A call of tool 'echo' cannot become a task. {NOT_RUNNING_MESSAGE}"]
