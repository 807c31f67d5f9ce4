"""The app the soak test serves (``mcp-tasks serve soak_app:mcp``): one instant tool whose
tasks live ``SOAK_TTL_MS`` and are reaped every ``SOAK_REAP_S``, on ``SOAK_STORE_URL``, and
a plain tool, ``held``, that says what the process holds (served with ``tracemalloc`` on:
``PYTHONTRACEMALLOC=1``).

Results are kept no longer than the TTL (``result_retention_ms=0``), so a long run keeps
only its last few seconds of tasks: what stays in the process is what leaks.
"""

from __future__ import annotations

import gc
import os
import tracemalloc
from typing import Any

from mcp.server.mcpserver import MCPServer

from mcp_tasks import RunnerOptions, ServingOptions, StoreOptions, Tasks, store_from_url

#: Long enough for a client on a loaded machine to see its task completed before it expires
#: (2 s and 4 s were not), short enough that the tasks alive at once (the soak's rate x TTL)
#: are there within its first ``WARM_TASKS`` (test_soak.py).
TTL_MS = int(os.environ.get("SOAK_TTL_MS", "8000"))
REAP_S = float(os.environ.get("SOAK_REAP_S", "0.5"))

# Any: stats() is an optional Store method, which the soak's stores all have.
store: Any = store_from_url(os.environ["SOAK_STORE_URL"], StoreOptions(result_retention_ms=0))
# A task cannot expire while its lease holds, so the lease is no longer than the TTL.
tasks = Tasks(
    store=store,
    close_store=True,
    runner=RunnerOptions(lease_ms=TTL_MS, reap_interval_s=REAP_S),
    serving=ServingOptions(default_ttl_ms=TTL_MS),
)
mcp: MCPServer[Any] = MCPServer(
    "soak", extensions=[tasks.extension()], lifespan=tasks.lifespan, log_level="WARNING"
)


@tasks.tool(mcp, mode="required", poll_interval_ms=50)
async def echo(token: str) -> str:
    """Answer the token at once."""
    return token


@mcp.tool()
async def held(traced: bool = True) -> dict[str, int]:
    """The rows the store keeps (expired ones not reaped yet included), and with ``traced``
    the bytes of Python memory in use after a full collection (``tracemalloc``'s traced
    memory: what the process holds, whatever the C allocator keeps of what it freed).
    Without it no collection runs: a full one costs a busy server's CPU at every poll."""
    rows = (await store.stats()).rows
    if not traced:
        return {"rows": rows}
    gc.collect()
    in_use, _ = tracemalloc.get_traced_memory()
    return {"rows": rows, "traced": in_use}
