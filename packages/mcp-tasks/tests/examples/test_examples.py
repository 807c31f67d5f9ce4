"""Each example server, loaded from its file and served over real HTTP, does what it says."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mcp_types as types
import pytest
from mcp.client.client import Client

from mcp_tasks.client import TaskHandle, start_tool, tasks_client
from mcp_tasks.testing import running

if TYPE_CHECKING:
    from mcp.client.session import ClientRequestContext

pytestmark = pytest.mark.anyio

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"


def load(name: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The example's module globals, on a fresh memory store."""
    monkeypatch.setenv("MCP_TASKS_STORE_URL", "memory://")
    return runpy.run_path(str(EXAMPLES / name))


def text_of(result: types.CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def confirm(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult | types.ErrorData:
    return types.ElicitResult(action="accept", content={"confirm": True})


async def test_official_sdk_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """build runs as a task with progress; release waits for confirmation and completes."""
    example = load("official_sdk_server.py", monkeypatch)
    async with (
        running(example["mcp"]) as url,
        tasks_client(url, elicitation_callback=confirm) as client,
    ):
        handle = await start_tool(client, "build", {"ref": "main"})
        assert isinstance(handle, TaskHandle)
        state = await handle.wait()
        assert text_of(state.call_tool_result()) == "built main"
        released = await client.call_tool("release", {"version": "1.0"})
    assert text_of(released) == "published 1.0"


async def test_lowlevel_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """The low-level server's checksum is a task for a declaring client, inline otherwise."""
    example = load("lowlevel_server.py", monkeypatch)
    expected = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    async with running(example["server"]) as url:
        async with tasks_client(url) as client:
            handle = await start_tool(client, "checksum", {"text": "hello"})
            assert isinstance(handle, TaskHandle)
            state = await handle.wait()
            assert text_of(state.call_tool_result()) == expected
        async with Client(url) as plain:
            inline = await plain.call_tool("checksum", {"text": "hello"})
    assert text_of(inline) == expected


async def test_fastmcp_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """The FastMCP example's task tools run on the mcp-tasks store."""
    example = load("fastmcp_server.py", monkeypatch)
    async with running(example["mcp"]) as url, tasks_client(url) as client:
        handle = await start_tool(client, "slow_sum", {"numbers": [1, 2, 3.5]})
        assert isinstance(handle, TaskHandle)
        state = await handle.wait()
        result = state.call_tool_result()
        audit = await client.call_tool("audit", {"path": "relative"})
    assert not result.is_error
    assert "6.5" in text_of(result)
    assert audit.is_error
