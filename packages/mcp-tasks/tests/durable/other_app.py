"""Another app on the crash tests' store (``CRASH_STORE_URL``): its one task tool is
``other``, none of ``crash_app``'s. Its applied task ends are logged as ``crash_app``'s are
(``commit`` lines in ``CRASH_LOG``), so a test sees any task this app ended."""

from __future__ import annotations

import os
from typing import Any

from commit_log import CommitLog
from mcp.server.mcpserver import MCPServer

from mcp_tasks import RunnerOptions, Tasks, store_from_url

store: Any = CommitLog(store_from_url(os.environ["CRASH_STORE_URL"]))
tasks = Tasks(store=store, close_store=True, runner=RunnerOptions(recovery_interval_s=1.0))
mcp: MCPServer[Any] = MCPServer("other", extensions=[tasks.extension()], lifespan=tasks.lifespan)


@tasks.tool(mcp, mode="required")
async def other() -> str:
    return "other"
