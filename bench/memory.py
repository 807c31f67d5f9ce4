"""Section 5: memory. Bytes per task in the memory store (traced allocations), and the
resident size of our server process holding ``--memory-tasks`` (100 k) tasks.

    python -m bench.memory 100000     # prints one JSON object (run as its own process)

The resident size is measured in a fresh process that builds the server (the same app as
``bench.servers ours`` on ``memory://``), reads its ``VmRSS``, stores the tasks through the
server's own store and reads ``VmRSS`` again.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import tracemalloc

from bench.common import ROOT, resident_bytes
from bench.servers import ours_with_tasks
from bench.stores import seed
from mcp_tasks import StoreOptions, store_from_url


async def bytes_per_task(count: int) -> float:
    """Traced bytes the memory store holds per task, over ``count`` tasks."""
    store = store_from_url("memory://", StoreOptions(max_rows=None))
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    await seed(store, count)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return (after - before) / count


async def server_holding(count: int) -> dict[str, float]:
    _app, tasks = ours_with_tasks("memory://", None)
    gc.collect()
    empty = resident_bytes(os.getpid())
    await seed(tasks.store, count)
    gc.collect()
    full = resident_bytes(os.getpid())
    return {
        "tasks": count,
        "server_rss_empty_mb": empty / 2**20,
        "server_rss_mb": full / 2**20,
        "rss_bytes_per_task": (full - empty) / count,
    }


def measure(count: int) -> dict[str, float]:
    """Both figures, each in a process of its own (tracing slows and inflates the other)."""
    results = {}
    for what in ("traced", "rss"):
        done = subprocess.run(
            [sys.executable, "-m", "bench.memory", what, str(count)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        results.update(json.loads(done.stdout))
    return results


def main() -> None:
    what, count = sys.argv[1], int(sys.argv[2])
    if what == "traced":
        figures = {"store_bytes_per_task": asyncio.run(bytes_per_task(min(count, 20_000)))}
    else:
        figures = asyncio.run(server_holding(count))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
