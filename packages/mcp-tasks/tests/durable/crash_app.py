"""The app the crash tests serve in two real processes (``mcp-tasks serve`` / ``worker``).

Its store (``CRASH_STORE_URL``) is wrapped so that every write that ENDS a task and was
applied is appended to ``CRASH_LOG`` (one line: process id, task id, status, wall time): the test
counts commits per task across processes. Every start of a body run appends a ``run`` line
the same way, so the test sees which process ran what (at least once) and that each task
committed exactly once. An applied retry appends a ``retry`` line with the record's
``last_updated_at`` and ``retry_at`` (store clock, epoch ms).

``CRASH_LEASE_MS``, ``CRASH_HEARTBEAT_MS`` and ``CRASH_RECOVERY_S`` set the ``Tasks``
options of the same names (3 s, the default, 1 s when unset).
"""

from __future__ import annotations

import os
import time
from typing import Any

import anyio
from commit_log import CommitLog, log, ran_before
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from mcp_tasks import RunnerOptions, TaskContext, Tasks, store_from_url

LEASE_MS = int(os.environ.get("CRASH_LEASE_MS", "3000"))
#: Unset: the default heartbeat (a third of the lease, at most 10 s).
HEARTBEAT_MS = int(os.environ["CRASH_HEARTBEAT_MS"]) if "CRASH_HEARTBEAT_MS" in os.environ else None
RECOVERY_S = float(os.environ.get("CRASH_RECOVERY_S", "1"))


store: Any = CommitLog(store_from_url(os.environ["CRASH_STORE_URL"]))
tasks = Tasks(
    store=store,
    close_store=True,
    runner=RunnerOptions(
        lease_ms=LEASE_MS, heartbeat_ms=HEARTBEAT_MS, recovery_interval_s=RECOVERY_S
    ),
)
mcp: MCPServer[Any] = MCPServer("crash", extensions=[tasks.extension()], lifespan=tasks.lifespan)
#: The same app as the server on another host serves it (test_remote_store.py): reached by
#: its address, not as localhost, so without the SDK's localhost-only Host check, as an
#: operator serving beyond loopback configures it.
anywhere = tasks.http_app(
    mcp,
    streamable_http_path="/mcp",
    transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
)


@tasks.tool(mcp, mode="required", poll_interval_ms=100)
async def slow(seconds: float, ctx: TaskContext, rerun_seconds: float | None = None) -> str:
    """Report that this run started (a ``run`` line, and a ``began`` line with the wall time
    it began), sleep ``seconds`` (``rerun_seconds``, when given, if a run of this task is
    logged already: a takeover), answer which process finished."""
    assert ctx.idempotency_key is not None
    if rerun_seconds is not None and ran_before(ctx.idempotency_key):
        seconds = rerun_seconds
    log("run", ctx.idempotency_key, f"attempt={ctx.attempt}")
    log("began", ctx.idempotency_key, f"{time.time():.6f}")
    await ctx.progress(0, seconds, f"running in {os.getpid()}")
    await anyio.sleep(seconds)
    return f"done by {os.getpid()}"


@tasks.tool(mcp, mode="required", poll_interval_ms=100)
async def marked(token: str, seconds: float) -> str:
    """Sleep, then answer the task's own ``token``: a result no other task has."""
    await anyio.sleep(seconds)
    return token


@tasks.tool(mcp, mode="required", poll_interval_ms=100, retry_delays_ms=[2_000])
async def flaky(ctx: TaskContext) -> str:
    """Ask for one retry on the first run; the retry succeeds. Each run also logs the wall
    time it began (a ``began`` line)."""
    assert ctx.idempotency_key is not None
    log("run", ctx.idempotency_key, f"attempt={ctx.attempt}")
    log("began", ctx.idempotency_key, f"{time.time():.6f}")
    if ctx.attempt == 0:
        ctx.retry("upstream busy")
    return f"done on attempt {ctx.attempt}"


@tasks.tool(mcp, mode="required", poll_interval_ms=100, retry_delays_ms=[300, 300])
async def hopeless(ctx: TaskContext) -> str:
    """Ask for a retry on every run: the retries run out and the task fails."""
    assert ctx.idempotency_key is not None
    log("run", ctx.idempotency_key, f"attempt={ctx.attempt}")
    ctx.retry(f"still broken on attempt {ctx.attempt}", code=-32000, data={"a": ctx.attempt})


@tasks.tool(mcp, mode="required", poll_interval_ms=100)
async def stoppable(ctx: TaskContext) -> str:
    """Run until cancelled; log the wall time the body stopped (a ``stopped`` line)."""
    assert ctx.idempotency_key is not None
    log("run", ctx.idempotency_key, f"attempt={ctx.attempt}")
    try:
        await anyio.sleep_forever()
    finally:
        log("stopped", ctx.idempotency_key, f"{time.time():.6f}")
    return "unreachable"


@tasks.tool(mcp, mode="required", poll_interval_ms=100)
async def answerable(ctx: TaskContext) -> str:
    """Ask one question; log the wall time the answer reached the body (an ``answered``
    line), and the wall time just before the task ends (a ``finishing`` line)."""
    assert ctx.idempotency_key is not None
    log("run", ctx.idempotency_key, f"attempt={ctx.attempt}")
    await ctx.elicit("go", "Go on?", {"type": "object", "properties": {}})
    log("answered", ctx.idempotency_key, f"{time.time():.6f}")
    log("finishing", ctx.idempotency_key, f"{time.time():.6f}")
    return "answered"


@tasks.tool(mcp, mode="required", poll_interval_ms=100, recovery="fail")
async def pay(seconds: float, ctx: TaskContext) -> str:
    """A body that must not run twice: sleep, then answer; a run that is interrupted is not
    run again (``recovery="fail"``)."""
    assert ctx.idempotency_key is not None
    log("run", ctx.idempotency_key, f"attempt={ctx.attempt}")
    await ctx.progress(0, seconds, f"running in {os.getpid()}")
    await anyio.sleep(seconds)
    return f"paid by {os.getpid()}"
