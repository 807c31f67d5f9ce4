"""More processes on one store: completed tasks per second with 1, 2 and 4 ``mcp-tasks
serve`` processes, and with one serving process that creates tasks and runs none beside 2
``mcp-tasks worker``s that run them, each on Postgres, Redis and a SQLite file.

The client is section 2's workload (``served.drive``): ``tasks`` tasks of a 0 ms ``nap``,
``in_flight`` at once spread evenly over the serving processes, each polled every
``poll_ms`` until completed. Per arrangement: completed tasks per second (wall clock), the
CPU ms per task of each process (utime + stime from ``/proc``) and of the database's
processes serving them (as section 2 reads them), the busiest process's, the database's
and the client's (this process) share of a core, and how busy the machine's cores were
(``/proc/stat``, everything on them included): where the curve flattens, they say which
ran out (a process, the database, or the machine's cores).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import common
from bench.common import CLI, ROOT, cpu_of, database_pids, find_backends, stop
from bench.run import goal
from bench.served import drive

if TYPE_CHECKING:
    from collections.abc import Iterator

    from bench.common import Backend

STORES = ("postgres", "redis", "sqlite", "mongodb")
#: Why a test server of smaller sizes (the embedded SecantusDB) is left out: measured here,
#: one serving process held it at a full core.
ONE_CORE = (
    "one Python process, which one serving process holds at a full core (27 tasks a second,"
    " 37 ms of its CPU per task; 7.5 with two): the curve would be the test server's; a"
    " server named by MCP_TASKS_TEST_MONGODB_URL is measured"
)
#: The arrangements measured: serving processes, and workers beside them (then the serving
#: process creates tasks and runs none).
ARRANGEMENTS = {
    "1 serve": (1, 0),
    "2 serve": (2, 0),
    "4 serve": (4, 0),
    "1 serve + 2 workers": (1, 2),
}


@contextmanager
def worker_process(store_url: str) -> Iterator[subprocess.Popen[bytes]]:
    """``mcp-tasks worker bench.serve_app:mcp`` on the store until the block ends."""
    logs = ROOT / ".cache" / "bench" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    argv = [CLI, "worker", "bench.serve_app:mcp", "--store", store_url, "--log-level", "warning"]
    with (logs / f"worker-{os.getpid()}-{time.monotonic_ns()}.log").open("wb") as log:
        process = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        try:
            yield process
        finally:
            stop(process)


def machine_times() -> tuple[int, int]:
    """``(busy, total)`` clock ticks of every core so far (``/proc/stat``)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return sum(fields) - idle, sum(fields)


def busy_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The share of every core's time that was busy between two :func:`machine_times`."""
    return (after[0] - before[0]) / max(after[1] - before[1], 1)


def arrangement(
    backend: Backend, serving: int, workers: int, *, tasks: int, in_flight: int, poll_ms: int
) -> dict[str, Any]:
    """Completed tasks per second and CPU per task with ``serving`` processes (creating
    only, with ``workers`` workers beside them)."""
    app = "bench.serve_app:create_only" if workers else "bench.serve_app:mcp"
    with ExitStack() as stack:
        ports, pids = common.serving(stack, app, backend.url, serving)
        worker_pids = [stack.enter_context(worker_process(backend.url)).pid for _ in range(workers)]
        share = max(1, in_flight // serving)

        async def run(count: int) -> None:
            await asyncio.gather(*(drive(p, count // serving, share, 0, poll_ms) for p in ports))

        asyncio.run(run(in_flight * serving))  # warm-up: every process has served and run
        processes = pids + worker_pids
        database = set()
        for pid in pids:
            database |= set(database_pids(backend.name, backend.base or backend.url, pid) or [])
        before = cpu_of([*processes, *database])
        client_before, machine_before = os.times(), machine_times()
        started = time.perf_counter()
        asyncio.run(run(tasks))
        wall = time.perf_counter() - started
        client_after, machine_after = os.times(), machine_times()
        for pid in pids:  # connections opened meanwhile count from their start
            database |= set(database_pids(backend.name, backend.base or backend.url, pid) or [])
        after = cpu_of([*processes, *database])
    used = {pid: after[pid] - before.get(pid, 0.0) for pid in after}
    per_process = [round(used[p] * 1000 / tasks, 3) for p in processes]
    database_s = sum(used[p] for p in database if p in used)
    busiest = max(used[p] for p in processes)
    return {
        "tasks_per_s": round(tasks / wall, 1),
        "cpu_ms_per_task_by_process": per_process,
        "serving": serving,
        "workers": workers,
        "cpu_ms_per_task": round(sum(used[p] for p in processes) * 1000 / tasks, 3),
        "database_cpu_ms_per_task": round(database_s * 1000 / tasks, 3),
        "busiest_process_core_share": round(busiest / wall, 2),
        "database_core_share": round(database_s / wall, 2),
        "client_core_share": round(
            (client_after.user + client_after.system - client_before.user - client_before.system)
            / wall,
            2,
        ),
        # Every process's, this run's and the other work on the machine: 1.0 is every core.
        "machine_busy_share": round(busy_share(machine_before, machine_after), 2),
        "wall_s": round(wall, 2),
    }


def part(
    stack: ExitStack, directory: Path, *, quick: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every arrangement on each of :data:`STORES`; ratios of tasks per second."""
    settings = {"tasks": 200 if quick else 1_200, "in_flight": 40, "poll_ms": 20}
    found: dict[str, Any] = {"settings": settings}
    ratios: dict[str, Any] = {}
    backends = find_backends(stack, directory, list(STORES))
    cores = os.cpu_count() or 1
    for name in STORES:
        backend = backends.get(name)
        missing = None if backend else backends.missing.get(name, "not available")
        if backend is not None and backend.at_most:
            missing, backend = f"not measured on the {backend.server}: {ONE_CORE}", None
        figures: dict[str, Any] = {}
        if backend is not None:
            print(f"4d. {name}: completed tasks per second by processes", flush=True)
            for label, (serving, workers) in ARRANGEMENTS.items():
                figures[label] = arrangement(backend, serving, workers, **settings)
                shown = figures[label]
                print(
                    f"  {name:<9}{label:<22}{shown['tasks_per_s']:>8.1f} tasks/s"
                    f"  CPU ms/task by process {shown['cpu_ms_per_task_by_process']}"
                    f"  database {shown['database_cpu_ms_per_task']}"
                    f"  (busiest process {shown['busiest_process_core_share']:.2f} core,"
                    f" database {shown['database_core_share']:.2f}, client"
                    f" {shown['client_core_share']:.2f}; machine busy"
                    f" {shown['machine_busy_share']:.0%})",
                    flush=True,
                )
        found[name] = figures or {"missing": missing}

        def rate(label: str, figures: dict[str, Any] = figures) -> float | None:
            found: float | None = figures.get(label, {}).get("tasks_per_s")
            return found

        # Goals scaled to the machine: n processes cannot pass its cores.
        for label, n in (("2 serve", 2), ("4 serve", 4)):
            target = round(0.8 * min(n, cores), 2)
            key = f"processes.{name}.tasks_per_s_{n}_serve_vs_1"
            ratios[key] = goal((rate(label), rate("1 serve")), ">=", target, missing)
        ratios[f"processes.{name}.tasks_per_s_2_workers_vs_1_serve"] = goal(
            (rate("1 serve + 2 workers"), rate("1 serve")), ">=", 1.0, missing
        )
    return found, ratios
