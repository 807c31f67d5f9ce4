"""Idle costs nothing: an ``mcp-tasks serve`` and an ``mcp-tasks worker`` with no task to run
use under 1 % of a core on every store, with the default intervals (a recovery sweep a
second, a reap every 30 s, the change relay's health check).

CPU time is the process's own (``utime + stime`` from ``/proc/PID/stat``), so a loaded
machine does not inflate it; a database server (Postgres, Redis, the embedded SecantusDB,
each a process of its own) is not in it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import httpx2 as httpx
import pytest

from mcp_tasks.testing import RawClient

if TYPE_CHECKING:
    from conftest import Processes

pytestmark = pytest.mark.anyio

#: Answering is not yet idle: the first sweeps, lazy imports, connections of a pool.
SETTLE_S = 2.0
IDLE_S = 5.0
CORE_SHARE = 0.01


def cpu_s(pid: int) -> float:
    """CPU seconds process ``pid`` has used, in user and kernel mode."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    # Fields after the command name (which may hold spaces), from the state (field 3) on.
    fields = stat.rpartition(")")[2].split()
    user, system = int(fields[11]), int(fields[12])  # fields 14 and 15
    return (user + system) / os.sysconf("SC_CLK_TCK")


async def test_an_idle_server_and_worker_use_under_one_percent_of_a_core(
    every_store_url: str, every_store_processes: Processes
) -> None:
    """``mcp-tasks serve`` and ``mcp-tasks worker`` of one app on the store, no task
    anywhere: over ``IDLE_S`` each uses under 1 % of a core."""
    server = await every_store_processes.serve()
    worker = await every_store_processes.worker()
    assert server.url is not None
    async with httpx.AsyncClient(timeout=60) as http:  # started: its lifespan has run
        answer = await RawClient(http, server.url).call("tasks/get", {"taskId": "none"})
    assert "error" in answer
    await anyio.sleep(SETTLE_S)
    before = {"serve": cpu_s(server.pid), "worker": cpu_s(worker.pid)}
    await anyio.sleep(IDLE_S)
    after = {"serve": cpu_s(server.pid), "worker": cpu_s(worker.pid)}
    share = {name: (after[name] - before[name]) / IDLE_S for name in before}
    store = every_store_url.partition(":")[0]
    print(f"idle on {store}: " + ", ".join(f"{n} {s:.2%} of a core" for n, s in share.items()))
    assert all(s < CORE_SHARE for s in share.values()), f"idle on {store}: {share}"
