"""This checkout against another git revision, side by side in one sitting: ``tasks/get``
under wrk (requests per second, and the server's CPU time per request) and the end-to-end
CPU per task, on one store (memory unless ``--backend`` names another), with no
OpenTelemetry SDK set up in either server (what the hooks cost when nobody exports).

Both servers run at once, each its own process and, on a durable store, each its own
namespace; the revision's runs with its own packages (``git archive`` of the revision's
``packages/*/src``, first on ``PYTHONPATH``) and everything else from this environment.
The rounds alternate (this, the revision, this, …) so a spell of load elsewhere on a
shared machine lands on both sides; the report is every round's ratio, their median and
their spread. On a busy machine requests per second swing with
the load; the server's CPU time per request swings far less, and capacity on one core is
its inverse::

    uv run python -m bench.against_revision main --rounds 8
    uv run python -m bench.against_revision main --backend postgres
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from bench.common import (
    ROOT,
    cpu_seconds,
    find_backends,
    free_port,
    namespace_factory,
    server_process,
)
from bench.served import (
    Target,
    check_answer,
    drive,
    ensure_wrk,
    repeated_request,
    run_wrk,
    wrk_script,
)


def revision_source(revision: str, directory: Path) -> str:
    """The ``PYTHONPATH`` of ``revision``'s packages (each ``packages/*/src``), unpacked
    under ``directory``."""
    archive = subprocess.run(
        ["git", "archive", revision, "packages"], cwd=ROOT, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(directory)], input=archive, check=True)
    return os.pathsep.join(str(src) for src in sorted((directory / "packages").glob("*/src")))


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f}, min {min(values):.3f}, max {max(values):.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revision", help="the git revision to compare with (e.g. main)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=5.0, help="wrk seconds per round")
    parser.add_argument("--tasks", type=int, default=600, help="tasks per CPU round")
    parser.add_argument(
        "--backend", default="memory", choices=["memory", "sqlite", "postgres", "redis", "mongodb"]
    )
    args = parser.parse_args()
    wrk = ensure_wrk()
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        source = revision_source(args.revision, Path(tmp))
        found = find_backends(stack, Path(tmp), [args.backend])
        backend = found.get(args.backend)
        if backend is None:
            raise SystemExit(f"{args.backend}: {found.missing[args.backend]}")
        fresh = namespace_factory(stack, Path(tmp), backend)
        sides: dict[str, tuple[Target, int]] = {}
        for name, env in (("this", {}), (args.revision, {"PYTHONPATH": source})):
            port = free_port()
            argv = [sys.executable, "-m", "bench.servers", "ours", "--store", fresh()]
            target = Target(name, [*argv, "--port", str(port), "--max-rows", "0"], port, "tasks")
            process = stack.enter_context(server_process(target.argv, port, env=env))
            sides[name] = (target, process.pid)
        scripts = {}
        for name, (target, _) in sides.items():
            method, params, routed = repeated_request(target)
            check_answer(target, method, params, routed)
            scripts[name] = wrk_script(method, params, routed, Path(tmp) / name)
            run_wrk(wrk, target.port, scripts[name], 1, 50)  # warm-up
            asyncio.run(drive(target.port, 50, 50, 0, 50))  # warm-up
        rps: dict[str, list[float]] = {name: [] for name in sides}
        per_get: dict[str, list[float]] = {name: [] for name in sides}
        cpu: dict[str, list[float]] = {name: [] for name in sides}
        for round_ in range(args.rounds):
            # Alternate which side goes first too: a round's second half is no likelier
            # to meet a busy spell on one side than the other.
            order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
            for name in order:
                target, pid = sides[name]
                before = cpu_seconds(pid)
                rate = run_wrk(wrk, target.port, scripts[name], args.seconds, 50)
                rps[name].append(rate)
                per_get[name].append((cpu_seconds(pid) - before) / (rate * args.seconds) * 1e6)
                before = cpu_seconds(pid)
                asyncio.run(drive(target.port, args.tasks, 50, 200, 50))
                cpu[name].append((cpu_seconds(pid) - before) * 1000 / args.tasks)
            print(
                f"round {round_ + 1}: tasks/get "
                + ", ".join(f"{n} {rps[n][-1]:,.0f}/s {per_get[n][-1]:.0f} us CPU" for n in sides)
                + "; CPU/task "
                + ", ".join(f"{n} {cpu[n][-1]:.3f} ms" for n in sides),
                flush=True,
            )
    this, other = sides

    def ratios(figures: dict[str, list[float]]) -> list[float]:
        return [a / b for a, b in zip(figures[this], figures[other], strict=True)]

    print(f"{backend.name} ({backend.server}), {args.rounds} rounds")
    print(f"tasks/get requests/s, this / {other}: {spread(ratios(rps))}")
    print(f"tasks/get server CPU per request, this / {other}: {spread(ratios(per_get))}")
    print(f"CPU per task, this / {other}: {spread(ratios(cpu))}")


if __name__ == "__main__":
    main()
