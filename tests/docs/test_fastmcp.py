"""docs/fastmcp.md, run: its FastMCP app, served over real HTTP, answers `crunch` with a
task that reports its progress and ends with the doubled number; called without the
extension, the same tool answers at once."""

from __future__ import annotations

from typing import TYPE_CHECKING

from markdown_blocks import PageBlocks, program, run_program

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

PAGE = PageBlocks("docs/fastmcp.md")
APP = PAGE.take("mcp = FastMCP(")

CALL = """
import anyio
from mcp import Client

from mcp_tasks.client import TaskHandle
from mcp_tasks.testing import running, start_tool, tasks_client


async def call_crunch():
    async with running(mcp) as url:
        async with tasks_client(url) as client:
            handle = await start_tool(client, "crunch", {"n": 21})
            assert isinstance(handle, TaskHandle)
            messages = [state.status_message async for state in handle.watch()]
            final = await handle.get()
        assert final.status == "completed", final
        assert final.call_tool_result().structured_content == {"result": 42}, final
        assert "crunching (1/2)" in messages, messages
        async with Client(url) as plain:  # no tasks extension declared: a plain call
            answer = await plain.call_tool("crunch", {"n": 4})
        assert answer.structured_content == {"result": 8}, answer


anyio.run(call_crunch)
"""


def test_the_fastmcp_app_runs_crunch_as_a_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    run_program(program(APP, CALL), "fastmcp_app")
