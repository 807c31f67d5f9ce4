"""The PNG charts of a run (matplotlib, no display), beside ``latest.json``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import matplotlib as mpl

mpl.use("Agg")
import matplotlib.pyplot as plt

if TYPE_CHECKING:
    from pathlib import Path

OURS = "#2a6f97"
OTHER = "#c44e52"
FLOOR = "#8c8c8c"


def save(fig: Any, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def colour(name: str) -> str:
    if name.startswith("fastmcp-tasks"):
        return OTHER
    floors = ("sdk tools/call", "bare starlette")
    return FLOOR if name.startswith(floors) or name.endswith("floor") else OURS


def labelled_bars(ax: Any, names: list[str], values: list[float], fmt: str) -> None:
    bars = ax.bar(names, values, color=[colour(n) for n in names])
    ax.bar_label(bars, labels=[fmt.format(v) for v in values], fontsize=8)
    ax.tick_params(axis="x", labelrotation=20, labelsize=8)


def poll_capacity(results: dict[str, Any], out: Path) -> None:
    polls = results["poll_capacity"]
    names = list(polls)
    fig, ax = plt.subplots(figsize=(10, 4.5))
    labelled_bars(ax, names, [polls[n]["requests_per_s"] for n in names], "{:,.0f}")
    ax.set_ylabel("requests per second")
    ax.set_title(
        "tasks/get under wrk (1 thread, 50 connections); floors in grey\n"
        "uvicorn.run on asyncio and h11 unless named (serve: mcp-tasks serve; uvloop: "
        "uvloop and httptools)",
        fontsize=9,
    )
    save(fig, out / "poll_capacity.png")


def cpu_per_task(results: dict[str, Any], out: Path) -> None:
    """Left: CPU per completed task, server and database stacked, with each store's floor
    beside it; right: the create latency."""
    cpu = results["cpu_per_task"]
    names = [n for n in cpu if "create_p50_ms" in cpu[n]]
    floors = results.get("floor", {})
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    bars: list[str] = []
    server: list[float] = []
    database: list[float] = []
    for name in names:
        bars.append(name)
        server.append(cpu[name]["server_cpu_ms_per_task"])
        database.append(cpu[name]["database_cpu_ms_per_task"] or 0.0)
        if floors.get(name, {}).get("cpu_ms_per_task") is not None:
            bars.append(f"{name} floor")
            server.append(floors[name]["cpu_ms_per_task"])
            database.append(0.0)
    left.bar(bars, server, color=[colour(n) for n in bars], label="server")
    stacked = left.bar(bars, database, bottom=server, color="#f0a202", label="database")
    totals = [a + b for a, b in zip(server, database, strict=True)]
    left.bar_label(stacked, labels=[f"{t:.1f}" for t in totals], fontsize=7)
    left.tick_params(axis="x", labelrotation=35, labelsize=7)
    left.set_ylabel("CPU ms per completed task")
    left.set_title("CPU per task (server + database); floors in grey")
    left.legend(fontsize=8)
    x = range(len(names))
    right.bar([i - 0.2 for i in x], [cpu[n]["create_p50_ms"] for n in names], 0.4, label="p50")
    right.bar([i + 0.2 for i in x], [cpu[n]["create_p99_ms"] for n in names], 0.4, label="p99")
    right.set_xticks(list(x), names, rotation=20, fontsize=8)
    right.set_ylabel("ms")
    right.set_title("create (tools/call) latency")
    right.legend()
    save(fig, out / "cpu_per_task.png")


def store_ops(results: dict[str, Any], out: Path) -> None:
    ops = results["store_ops"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    compared = [n for n in ops if "raw read" in ops[n]]
    x = range(len(compared))
    for offset, (op, raw, goal) in zip(
        (-0.2, 0.2),
        (("store.get", "raw read", 0.7), ("store.put_status", "raw update", 0.5)),
        strict=True,
    ):
        values = [ops[n][op] / ops[n][raw] for n in compared]
        left.bar([i + offset for i in x], values, 0.4, label=f"{op[6:]} (goal ≥ {goal:g})")
    left.axhline(0.7, color="C0", linestyle=":")
    left.axhline(0.5, color="C1", linestyle=":")
    left.set_xticks(list(x), compared)
    left.set_ylabel("store ops/s ÷ raw driver ops/s")
    left.set_title("store vs raw driver, same server")
    left.legend(fontsize=8)
    names = list(ops)
    width = 0.2
    for k, op in enumerate(
        ("store.get", "store.put_status", "store.create", "store.claim+complete")
    ):
        left_edge = [i + (k - 1.5) * width for i in range(len(names))]
        right.bar(left_edge, [ops[n].get(op, 0) for n in names], width, label=op[6:])
    right.set_yscale("log")
    right.set_xticks(list(range(len(names))), names)
    right.set_ylabel("ops/s, one call at a time (log)")
    right.set_title("store operations")
    right.legend(fontsize=8)
    save(fig, out / "store_ops.png")


def scale(results: dict[str, Any], out: Path) -> None:
    scaled = results["scale"]
    names = list(scaled)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for k, op in enumerate(("get", "put_status", "create")):
        values = [scaled[n]["large"][f"{op}_us"] / scaled[n]["small"][f"{op}_us"] for n in names]
        left.bar([i + (k - 1) * 0.27 for i in range(len(names))], values, 0.27, label=op)
    left.axhline(1.3, color="black", linestyle=":", label="goal ≤ 1.3")
    rows = [f"{n}\n{scaled[n]['rows']['large'] // 1000} k tasks" for n in names]
    left.set_xticks(list(range(len(names))), rows, fontsize=8)
    left.set_ylabel(f"latency, large ÷ {results['settings']['scale_small']:,} tasks")
    left.set_title("latency as the store grows")
    left.legend(fontsize=8)
    capped = results["near_cap"]
    names = list(capped)
    x = range(len(names))
    right.bar([i - 0.2 for i in x], [capped[n]["far_creates_per_s"] for n in names], 0.4,
              label="far from the cap (first 5 %)")  # fmt: skip
    right.bar([i + 0.2 for i in x], [capped[n]["near_creates_per_s"] for n in names], 0.4,
              label="near it (90-95 %), reaper running")  # fmt: skip
    right.set_yscale("log")
    right.set_xticks(list(x), names)
    right.set_ylabel("creates per second (log)")
    right.set_title(f"create throughput, row cap {int(results['settings']['cap']):,}")
    right.legend(fontsize=8)
    save(fig, out / "scale.png")


def goals(results: dict[str, Any], out: Path) -> None:
    """Every goal as met / missed / not measured, one row each."""
    table = results["ratios"]
    names = list(table)
    fig, ax = plt.subplots(figsize=(9, 0.22 * len(names) + 0.8))
    shade = {True: "#4c9a2a", False: OTHER, None: FLOOR}
    for row, name in enumerate(names):
        entry = table[name]
        text = "—" if entry["measured"] is None else f"{entry['measured']:.2f}"
        ax.barh(row, 1, color=shade[entry["met"]])
        ax.text(0.02, row, f"{name}   {text} (goal {entry['goal']})", va="center", fontsize=7,
                color="white")  # fmt: skip
    ax.set_yticks([])
    ax.set_xticks([])
    ax.invert_yaxis()
    ax.set_title("goals: green met, red missed, grey not measured")
    save(fig, out / "goals.png")


def draw(results: dict[str, Any], out: Path) -> None:
    """Every chart of ``results`` into ``out``."""
    poll_capacity(results, out)
    cpu_per_task(results, out)
    store_ops(results, out)
    scale(results, out)
    goals(results, out)
