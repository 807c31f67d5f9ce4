"""Fixtures shared by the tests of mcp-tasks: real servers on free ports, and the real store
servers each backend provisions for tests (``store_servers``; a missing one skips locally
and fails when ``CI`` is set)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mcp_tasks.cli.demo_tools import demo_server
from mcp_tasks.stores.memory import MemoryTaskStore
from mcp_tasks.testing import running

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


@pytest.fixture
async def demo_url() -> AsyncIterator[str]:
    """The demo tools served over Streamable HTTP on a free 127.0.0.1 port (memory store)."""
    server = demo_server(MemoryTaskStore(), step_seconds=0.05, log_level="WARNING")
    async with running(server) as url:
        yield url
