"""Where tasks live is said at start-up, however the app is launched: the store is named
once at INFO, and a memory store is warned about once, naming what makes it durable."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks import Tasks
from mcp_tasks.stores.opening import URL_ENV
from mcp_tasks.testing import running

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio

LOGGER = "mcp_tasks.tasks"


@pytest.fixture(autouse=True)
def _no_store_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(URL_ENV, raising=False)


def _records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER]


async def test_a_memory_store_is_warned_about_once_naming_the_durable_ways(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    tasks = Tasks()
    async with tasks.lifespan(), tasks.lifespan():  # entered twice: still said once
        pass
    async with tasks.lifespan():  # a second lifespan (FastMCP: one per client): not again
        pass
    records = _records(caplog)
    assert [(r.levelno, r.getMessage()) for r in records] == [
        (logging.INFO, "mcp-tasks: tasks are stored in memory://"),
        (
            logging.WARNING,
            "mcp-tasks: tasks are kept in memory (memory://) and are lost when this process "
            "exits; for a durable store use Tasks(store=...) in the app, "
            "$MCP_TASKS_STORE_URL, or mcp-tasks serve --store URL",
        ),
    ]


async def test_a_durable_store_is_named_at_info_without_a_warning(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    tasks = Tasks(store=f"sqlite:///{tmp_path}/tasks.db")
    mcp = MCPServer("named", extensions=[tasks.extension()], lifespan=tasks.lifespan)
    async with running(mcp):
        pass
    assert [(r.levelno, r.getMessage()) for r in _records(caplog)] == [
        (logging.INFO, f"mcp-tasks: tasks are stored in sqlite:///{tmp_path}/tasks.db"),
    ]


def test_an_app_under_uvicorn_warns_of_its_memory_store(tmp_path: Path) -> None:
    """`uvicorn app:app` with `Tasks()` and no logging set up by the app: the store is
    named and the warning reaches the terminal, once each."""
    (tmp_path / "app.py").write_text(
        textwrap.dedent(
            """
            from mcp.server.mcpserver import MCPServer
            from mcp_tasks import Tasks

            tasks = Tasks()
            mcp = MCPServer("app", extensions=[tasks.extension()], lifespan=tasks.lifespan)
            app = tasks.http_app(mcp)
            """
        )
    )
    code = textwrap.dedent(
        """
        import asyncio, uvicorn
        config = uvicorn.Config("app:app", port=0, log_level="warning", lifespan="on")
        server = uvicorn.Server(config)
        async def main():
            task = asyncio.create_task(server.serve())
            while not server.started:
                await asyncio.sleep(0.05)
            server.should_exit = True
            await task
        asyncio.run(main())
        """
    )
    # Wide: the SDK logs through rich, which would wrap the line.
    env = {k: v for k, v in os.environ.items() if k != URL_ENV} | {"COLUMNS": "400"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stderr.count("mcp-tasks: tasks are stored in memory://") == 1, done.stderr
    assert done.stderr.count("tasks are kept in memory (memory://)") == 1, done.stderr
    assert "mcp-tasks serve --store URL" in done.stderr
