"""`mcp-tasks serve` as a real subprocess, driven by the tasks client over HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import httpx2 as httpx
import pytest

from mcp_tasks.client import TaskHandle, start_tool, tasks_client
from mcp_tasks.testing import free_socket

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.anyio

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"


@contextmanager
def serve(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """Run `mcp-tasks serve … --port P` until the block ends; yields the /mcp URL."""
    with free_socket() as sock:  # ask the OS for a free port, then hand it to the server
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "mcp_tasks.cli", "serve", *args, "--port", str(port)]
    process = subprocess.Popen(
        command, cwd=cwd, env={**os.environ, **(env or {})}, stderr=subprocess.PIPE, text=True
    )
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.communicate(timeout=30)


async def wait_until_up(url: str) -> None:
    with anyio.fail_after(30):
        while True:
            try:
                async with httpx.AsyncClient() as raw:
                    await raw.get(url)
                return
            except httpx.TransportError:
                await anyio.sleep(0.1)


async def test_serve_without_app_serves_the_demo_tools(tmp_path: Path) -> None:
    """With no APP, serve offers the demo tools with tasks enabled, on the given store."""
    with serve("--store", "memory://", cwd=tmp_path) as url:
        await wait_until_up(url)
        async with tasks_client(url) as client:
            handle = await start_tool(client, "build", {"ref": "served"})
            assert isinstance(handle, TaskHandle)
            state = await handle.wait()
    assert state.status == "completed"
    assert not any(tmp_path.iterdir()), "a memory store writes no file"  # noqa: ASYNC240


async def test_serve_an_app_by_module_path(tmp_path: Path) -> None:
    """serve APP imports module:attr (from the current directory) and serves it."""
    with serve("official_sdk_server:mcp", "--store", "memory://", cwd=EXAMPLES) as url:
        await wait_until_up(url)
        async with tasks_client(url) as client:
            handle = await start_tool(client, "build", {"ref": "app"})
            assert isinstance(handle, TaskHandle)
            state = await handle.wait()
    assert state.status == "completed"


FASTMCP_APP = """
from fastmcp import FastMCP

mcp = FastMCP("bare")


@mcp.tool(task=True)
async def triple(n: int) -> int:
    return n * 3
"""

BARE_MCPSERVER = """
from mcp.server.mcpserver import MCPServer

mcp = MCPServer("no-tasks")
"""


async def test_serve_gives_a_bare_fastmcp_app_our_extension(tmp_path: Path) -> None:
    """A FastMCP app with task=True tools and no tasks extension is served with ours."""
    await anyio.Path(tmp_path / "bare_fastmcp.py").write_text(FASTMCP_APP)
    with serve("bare_fastmcp:mcp", "--store", "memory://", cwd=tmp_path) as url:
        await wait_until_up(url)
        async with tasks_client(url) as client:
            handle = await start_tool(client, "triple", {"n": 5})
            assert isinstance(handle, TaskHandle)
            state = await handle.wait()
    assert state.status == "completed"
    assert state.result is not None
    assert "15" in str(state.result["content"])


def test_serve_refuses_an_sdk_app_without_tasks(tmp_path: Path) -> None:
    """An MCPServer that does not enable tasks is refused with the way to enable them."""
    (tmp_path / "bare_sdk.py").write_text(BARE_MCPSERVER)
    run = subprocess.run(
        [sys.executable, "-m", "mcp_tasks.cli", "serve", "bare_sdk:mcp", "--store", "memory://"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode != 0
    assert "does not enable mcp-tasks" in run.stderr
