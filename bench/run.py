"""The performance suite: every goal is a ratio of two figures measured side by side in one run.

    uv run nox -s bench                          # the whole suite (about 20 minutes)
    uv run python -m bench.run --quick           # a smaller run (a minute or two)

Writes ``bench/results/latest.json`` (the raw figures, and ``ratios``: each goal with the
measured ratio and whether it is met) and the PNG charts beside it; ``docs/performance.md``
explains them. Absolute figures depend on the machine and on whatever else runs on it: only
ratios of one run are compared.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench import memory, served, stores
from bench.common import ROOT, find_backends, namespace_factory

DURABLE = ("sqlite", "postgres", "redis", "mongodb")
ALL = ("memory", *DURABLE)


def settings(quick: bool) -> dict[str, Any]:
    """How much of each section to run (``--quick``: a smoke run, not for the goals)."""
    if quick:
        return {
            "wrk_seconds": 2, "wrk_rounds": 1, "wrk_connections": 50,
            "e2e_tasks": 60, "e2e_in_flight": 50, "e2e_tool_ms": 200, "e2e_poll_ms": 50,
            "store_ops": 300, "scale_small": 1_000, "scale_large": 5_000, "scale_ops": 300,
            "scale_seed_budget_s": 20,
            "cap": 2_000, "memory_tasks": 10_000,
        }  # fmt: skip
    return {
        "wrk_seconds": 8, "wrk_rounds": 2, "wrk_connections": 50,
        "e2e_tasks": 200, "e2e_in_flight": 50, "e2e_tool_ms": 200, "e2e_poll_ms": 50,
        "store_ops": 3_000, "scale_small": 1_000, "scale_large": 100_000, "scale_ops": 500,
        "scale_seed_budget_s": 100,
        "cap": 10_000, "memory_tasks": 100_000,
    }  # fmt: skip


#: The note of a goal whose figures include a 0: nothing was measured, so it cannot be met.
ZERO = "not measured: a figure of this run is 0"


def ratio(a: float | None, b: float | None) -> tuple[float | None, str | None]:
    """``a / b`` unrounded, or ``None`` and why not: a figure missing (no note: the caller
    knows why) or 0 (nothing measured: a server that answered nothing, a counter that never
    moved), which no goal may take for a ratio of 0 or of infinity."""
    if a is None or b is None:
        return None, None
    if a <= 0 or b <= 0:
        return None, ZERO
    return a / b, None


def goal(
    figures: tuple[float | None, float | None], op: str, target: float, why: str | None = None
) -> dict[str, Any]:
    """One goal: the ratio of two figures, the goal (``>= x`` or ``<= x``) and whether it
    holds. Judged on the unrounded ratio (the table keeps it to 3 decimals); a missing
    figure has no verdict, a figure of 0 misses the goal."""
    measured, failed = ratio(*figures)
    met = None if measured is None else (measured >= target if op == ">=" else measured <= target)
    entry: dict[str, Any] = {
        "measured": None if measured is None else round(measured, 3),
        "goal": f"{op} {target:g}",
        "met": False if failed else met,
    }
    note = failed or why or (None if measured is not None else "not measured")
    if note is not None:
        entry["note"] = note
    return entry


def reported(figures: tuple[float | None, float | None], why: str | None = None) -> dict[str, Any]:
    """A ratio reported without a goal: MongoDB's capacity and CPU (measured on the embedded
    SecantusDB server, whose absolute speed says nothing about a real ``mongod``), the
    create tail after the first wave (a reading beside the goal, not in its place)."""
    measured, failed = ratio(*figures)
    return {
        "measured": None if measured is None else round(measured, 3),
        "goal": "reported",
        "met": None,
        "note": failed or why or "reported, with no goal",
    }


AFTER_FIRST_WAVE = (
    "the creates after the first wave (the in_flight creates sent at once as the run starts);"
    " beside the goal, which counts every create"
)

#: The durable stores with capacity and CPU-per-task goals; MongoDB's are reported.
GOAL_DURABLE = ("sqlite", "postgres", "redis")


def ratios(results: dict[str, Any], missing: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Every goal of the suite, as a ratio of two figures of this run."""
    out: dict[str, dict[str, Any]] = {}
    polls = results["poll_capacity"]
    cpu = results["cpu_per_task"]

    def rps(name: str) -> float | None:
        value: float | None = polls.get(name, {}).get("requests_per_s")
        return value

    def absent(name: str) -> str | None:
        return missing.get(name)

    ft = rps("fastmcp-tasks")
    out["tasks_get.memory_vs_fastmcp_tasks"] = goal((rps("memory"), ft), ">=", 3)
    out["tasks_get.memory_vs_bare_starlette"] = goal(
        (rps("memory"), rps("bare starlette")), ">=", 0.45
    )
    for name in DURABLE:
        figures = (rps(name), ft)
        out[f"tasks_get.{name}_vs_fastmcp_tasks"] = (
            goal(figures, ">=", 2, absent(name))
            if name in GOAL_DURABLE
            else reported(figures, absent(name))
        )
    ft_cpu = cpu.get("fastmcp-tasks", {}).get("cpu_ms_per_task")
    for name in ALL:
        figures = (cpu.get(name, {}).get("cpu_ms_per_task"), ft_cpu)
        out[f"cpu_per_task.{name}_vs_fastmcp_tasks"] = (
            goal(figures, "<=", 0.15 if name == "memory" else 0.3, absent(name))
            if name == "memory" or name in GOAL_DURABLE
            else reported(figures, absent(name))
        )
    for name in ALL:
        row = cpu.get(name, {})
        out[f"create_p99_vs_p50.{name}"] = goal(
            (row.get("create_p99_ms"), row.get("create_p50_ms")), "<=", 3, absent(name)
        )
        out[f"create_p99_vs_p50_after_first_wave.{name}"] = reported(
            (row.get("later_create_p99_ms"), row.get("later_create_p50_ms")),
            absent(name) or AFTER_FIRST_WAVE,
        )
    for name in ALL:
        ops = results["store_ops"].get(name, {})
        no_raw = absent(name) or (None if "raw read" in ops else "no raw driver to compare")
        out[f"store_ops.{name}.get_vs_raw"] = goal(
            (ops.get("store.get"), ops.get("raw read")), ">=", 0.7, no_raw
        )
        out[f"store_ops.{name}.put_status_vs_raw"] = goal(
            (ops.get("store.put_status"), ops.get("raw update")), ">=", 0.5, no_raw
        )
    for name in ALL:
        scaled = results["scale"].get(name, {})
        for op in ("get", "put_status", "create"):
            out[f"scale.{name}.{op}_latency_large_vs_small"] = goal(
                (
                    scaled.get("large", {}).get(f"{op}_us"),
                    scaled.get("small", {}).get(f"{op}_us"),
                ),
                "<=",
                1.3,
                absent(name),
            )
        capped = results["near_cap"].get(name, {})
        out[f"cap.{name}.near_vs_far_creates"] = goal(
            (capped.get("near_creates_per_s"), capped.get("far_creates_per_s")),
            ">=",
            0.7,
            absent(name),
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small run (a smoke test)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--backends", nargs="*", choices=ALL, help="default: every available")
    parser.add_argument("--no-profile", action="store_true", help="skip the py-spy profile")
    args = parser.parse_args()
    config = settings(args.quick)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results: dict[str, Any] = {
        "settings": {**config, "quick": args.quick},
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
    }
    with ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        backends = find_backends(stack, directory, args.backends)
        results["backends"] = {b.name: b.server for b in backends.available}
        results["missing"] = backends.missing
        for name, why in backends.missing.items():
            print(f"{name}: {why}")

        fastmcp_python = served.ensure_fastmcp_tasks()
        targets = served.targets(backends.available, fastmcp_python)
        with served.all_started(targets) as pids:
            print("1. tasks/get capacity under wrk", flush=True)
            results["poll_capacity"] = served.poll_capacity(
                targets,
                pids,
                seconds=config["wrk_seconds"],
                connections=config["wrk_connections"],
                rounds=config["wrk_rounds"],
                profile_dir=None if args.no_profile else args.out,
            )
            print("2. CPU per completed task, end to end", flush=True)
            results["cpu_per_task"] = served.cpu_per_task(
                targets,
                pids,
                tasks=config["e2e_tasks"],
                in_flight=config["e2e_in_flight"],
                tool_ms=config["e2e_tool_ms"],
                poll_ms=config["e2e_poll_ms"],
            )
            if not args.no_profile:
                served.profile_creates(
                    targets, pids, seconds=config["wrk_seconds"], directory=args.out
                )

        results["store_ops"], results["scale"], results["near_cap"] = {}, {}, {}
        for backend in backends.available:
            fresh = namespace_factory(stack, directory, backend)
            sized = backend.sized(config)  # smaller on a slow server (bench/common.py)
            if backend.at_most:
                results["settings"].setdefault("at_most", {})[backend.name] = backend.at_most
            print(f"3-4. {backend.name}: store operations, scale, row cap", flush=True)
            results["store_ops"][backend.name] = asyncio.run(
                stores.store_ops(backend, fresh, sized["store_ops"])
            )
            results["scale"][backend.name] = asyncio.run(
                stores.scale(
                    fresh(),
                    sized["scale_small"],
                    sized["scale_large"],
                    sized["scale_ops"],
                    sized["scale_seed_budget_s"],
                )
            )
            results["near_cap"][backend.name] = asyncio.run(stores.near_cap(fresh(), sized["cap"]))
        print("5. memory", flush=True)
        results["memory"] = memory.measure(config["memory_tasks"])

    results["ratios"] = ratios(results, backends.missing)
    results["seconds"] = round(time.perf_counter() - started, 1)
    (args.out / "latest.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "goals.md").write_text(markdown_table(results["ratios"]))
    # Imported here: matplotlib (the bench group) is needed for drawing only.
    from bench import charts  # noqa: PLC0415

    charts.draw(results, args.out)
    print_table(results["ratios"])
    print(f"\nwrote {args.out / 'latest.json'} and charts in {results['seconds']} s")


def verdict(entry: dict[str, Any], missed: str) -> str:
    """A goal's result as the tables print it: met, ``missed`` (with why, when a figure was
    0) or, with no verdict, why not."""
    note: str | None = entry.get("note")
    if entry["met"] is True:
        return "met"
    if entry["met"] is False:
        return missed if note is None else f"{missed}: {note}"
    return note or "n/a"


def markdown_table(table: dict[str, dict[str, Any]]) -> str:
    """The goals as a Markdown table (for docs/performance.md)."""
    rows = ["| goal | measured | target | result |", "| --- | ---: | --- | --- |"]
    for name, entry in table.items():
        measured = "—" if entry["measured"] is None else f"{entry['measured']:.2f}"
        rows.append(f"| `{name}` | {measured} | {entry['goal']} | {verdict(entry, '**missed**')} |")
    return "\n".join(rows) + "\n"


def print_table(table: dict[str, dict[str, Any]]) -> None:
    print(f"\n{'goal':<52}{'measured':>10}  {'goal':<9}result")
    for name, entry in table.items():
        measured = "—" if entry["measured"] is None else f"{entry['measured']:.3f}"
        print(f"{name:<52}{measured:>10}  {entry['goal']:<9}{verdict(entry, 'MISSED')}")


if __name__ == "__main__":
    main()
