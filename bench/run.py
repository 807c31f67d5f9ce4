"""The performance suite: every goal is a ratio of two figures measured side by side in one run.

    uv run nox -s bench                          # the whole suite (about 20 minutes)
    uv run --group bench python -m bench.run --quick  # a smaller run (a minute or two)

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
from typing import TYPE_CHECKING, Any

from bench import memory, scale, served, stores
from bench.common import ROOT, find_backends, namespace_factory

if TYPE_CHECKING:
    from collections.abc import Callable

    from bench.common import Backend

DURABLE = ("sqlite", "postgres", "redis", "mongodb")
ALL = ("memory", *DURABLE)


def settings(quick: bool) -> dict[str, Any]:
    """How much of each section to run (``--quick``: a smoke run, not for the goals)."""
    if quick:
        return {
            "wrk_seconds": 2, "wrk_rounds": 1, "wrk_connections": 50,
            "e2e_tasks": 60, "e2e_in_flight": 50, "e2e_tool_ms": 200, "e2e_poll_ms": 50,
            "store_ops": 300, "scale_small": 1_000, "scale_large": 5_000, "scale_ops": 300,
            "scale_seed_budget_s": 20, "scale_expired": 300,
            "cap": 2_000, "memory_tasks": 10_000, "idle_seconds": 2,
        }  # fmt: skip
    return {
        "wrk_seconds": 8, "wrk_rounds": 2, "wrk_connections": 50,
        "e2e_tasks": 200, "e2e_in_flight": 50, "e2e_tool_ms": 200, "e2e_poll_ms": 50,
        "store_ops": 3_000, "scale_small": 1_000, "scale_large": 100_000, "scale_ops": 500,
        "scale_seed_budget_s": 100, "scale_expired": 2_000,
        "cap": 10_000, "memory_tasks": 100_000, "idle_seconds": 10,
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


#: The requests each side of a ratio answered per task (or per measured request), by
#: method: the work behind each figure, shown beside the ratio.
Requests = tuple[dict[str, float] | None, dict[str, float] | None]


def goal(
    figures: tuple[float | None, float | None],
    op: str,
    target: float,
    why: str | None = None,
    requests: Requests | None = None,
) -> dict[str, Any]:
    """One goal: the ratio of two figures, the goal (``>= x`` or ``<= x``) and whether it
    holds. Judged on the unrounded ratio (the table keeps it to 3 decimals); a missing
    figure has no verdict, a figure of 0 misses the goal. ``requests``: each side's."""
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
    if requests is not None:
        entry["requests"] = list(requests)
    return entry


def reported(
    figures: tuple[float | None, float | None],
    why: str | None = None,
    requests: Requests | None = None,
) -> dict[str, Any]:
    """A ratio reported without a goal: MongoDB's capacity and CPU (measured on the embedded
    SecantusDB server, whose absolute speed says nothing about a real ``mongod``), the
    durable stores' CPU against the peer's memory backend, the create tail after the first
    wave and the create request alone (readings beside a goal, not in its place)."""
    measured, failed = ratio(*figures)
    entry: dict[str, Any] = {
        "measured": None if measured is None else round(measured, 3),
        "goal": "reported",
        "met": None,
        "note": failed or why or "reported, with no goal",
    }
    if requests is not None:
        entry["requests"] = list(requests)
    return entry


AFTER_FIRST_WAVE = (
    "the creates after the first wave (the in_flight creates sent at once as the run starts);"
    " beside the goal, which counts every create"
)

#: The durable stores with capacity and CPU-per-task goals; MongoDB's are reported.
GOAL_DURABLE = ("sqlite", "postgres", "redis")

#: CPU per completed task against the floor (``floor``), per store: the goal.
FLOOR_GOALS = {"memory": 1.2, "sqlite": 1.4, "postgres": 1.5, "redis": 1.5}

#: What a capacity or tools/call ratio's two sides each answered: one request per request.
ONE_GET: Requests = ({"tasks/get": 1.0}, {"tasks/get": 1.0})
ONE_CALL: Requests = ({"tools/call": 1.0}, {"tools/call": 1.0})

PEER, PEER_REDIS, SDK, BARE = served.PEER, served.PEER_REDIS, served.SDK, served.BARE
CREATE_ONLY, SERVE, UVLOOP = served.CREATE_ONLY, served.SERVE, served.UVLOOP


def serving(results: dict[str, Any], a: str, b: str) -> str | None:
    """The note of a ratio of section 1's rows ``a`` and ``b``: how each was served (its
    ``served``); ``None`` when either was not measured."""
    polls = results["poll_capacity"]
    if "served" not in polls.get(a, {}) or "served" not in polls.get(b, {}):
        return None
    return f"{a}: {polls[a]['served']}; {b}: {polls[b]['served']}"


def floor(results: dict[str, Any], name: str) -> tuple[float | None, dict[str, float] | None]:
    """The floor of a task on store ``name`` (CPU ms) and its requests: the task's tool as
    one plain ``tools/call`` on the SDK (section 2's ``sdk tools/call``) plus as many
    ``tasks/get`` as our server on that store answered per task, each at what a
    ``tasks/get`` costs there on the fast path, server and database (section 1)."""
    cpu = results["cpu_per_task"]
    call = cpu.get(SDK, {}).get("cpu_ms_per_task")
    ours = cpu.get(name, {}).get("requests_per_task")
    get_us = results["poll_capacity"].get(name, {}).get("cpu_us_per_request")
    if call is None or ours is None or get_us is None:
        return None, None
    polls = ours.get("tasks/get", 0.0)
    calls = cpu[SDK]["requests_per_task"].get("tools/call", 0.0)
    return call + polls * get_us / 1000, {"tools/call": calls, "tasks/get": polls}


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

    def cpu_ms(name: str) -> float | None:
        value: float | None = cpu.get(name, {}).get("cpu_ms_per_task")
        return value

    def requests(name: str) -> dict[str, float] | None:
        value: dict[str, float] | None = cpu.get(name, {}).get("requests_per_task")
        return value

    peer = rps(PEER)
    out["tasks_get.memory_vs_fastmcp_tasks"] = goal((rps("memory"), peer), ">=", 3, None, ONE_GET)
    out["tasks_get.memory_vs_bare_starlette"] = goal(
        (rps("memory"), rps(BARE)), ">=", 0.95, None, ONE_GET
    )
    for name in DURABLE:
        figures = (rps(name), peer)
        out[f"tasks_get.{name}_vs_fastmcp_tasks"] = (
            goal(figures, ">=", 3, absent(name), ONE_GET)
            if name in GOAL_DURABLE
            else reported(figures, absent(name), ONE_GET)
        )
    # The same ratios on the production stack (uvloop, httptools), and our server under
    # `mcp-tasks serve` against uvicorn.run: readings beside the goals, each row's stack named.
    for a, b, key in (
        ("memory" + UVLOOP, BARE + UVLOOP, "tasks_get.memory_vs_bare_starlette_uvloop"),
        ("memory" + UVLOOP, PEER + UVLOOP, "tasks_get.memory_vs_fastmcp_tasks_uvloop"),
        (SERVE, "memory", "tasks_get.memory_serve_vs_uvicorn_run"),
        (SERVE, "memory" + UVLOOP, "tasks_get.memory_serve_vs_uvicorn_run_uvloop"),
    ):
        out[key] = reported((rps(a), rps(b)), serving(results, a, b), ONE_GET)
    no_redis_peer = None if PEER_REDIS in cpu else absent("redis") or "the peer on Redis: no Redis"
    for name, other, target in (("memory", PEER, 0.25), ("memory", PEER_REDIS, 0.25)):
        suffix = "_redis" if other == PEER_REDIS else ""
        why = no_redis_peer if other == PEER_REDIS else None
        out[f"cpu_per_task.{name}_vs_fastmcp_tasks{suffix}"] = goal(
            (cpu_ms(name), cpu_ms(other)), "<=", target, why, (requests(name), requests(other))
        )
    for name in DURABLE:
        out[f"cpu_per_task.{name}_vs_fastmcp_tasks"] = reported(
            (cpu_ms(name), cpu_ms(PEER)), absent(name), (requests(name), requests(PEER))
        )
    # Like for like, both on Redis with the Redis server's CPU counted: the row a reader of
    # "vs fastmcp-tasks on Redis" is owed beside memory's.
    out["cpu_per_task.redis_vs_fastmcp_tasks_redis"] = goal(
        (cpu_ms("redis"), cpu_ms(PEER_REDIS)),
        "<=",
        0.25,
        absent("redis") or no_redis_peer,
        (requests("redis"), requests(PEER_REDIS)),
    )
    for name in ALL:
        floor_ms, floor_requests = floor(results, name)
        figures = (cpu_ms(name), floor_ms)
        pair = (requests(name), floor_requests)
        out[f"cpu_per_task.{name}_vs_floor"] = (
            goal(figures, "<=", FLOOR_GOALS[name], absent(name), pair)
            if name in FLOOR_GOALS
            else reported(figures, absent(name), pair)
        )
    # Encryption at rest: the same server with a key, beside itself without (reported).
    for name in ALL:
        sealed = name + served.ENCRYPTED
        out[f"encryption.{name}.tasks_get_encrypted_vs_plain"] = reported(
            (rps(sealed), rps(name)), absent(name), ONE_GET
        )
        out[f"encryption.{name}.cpu_per_task_encrypted_vs_plain"] = reported(
            (cpu_ms(sealed), cpu_ms(name)), absent(name), (requests(sealed), requests(name))
        )
    calls = results.get("tools_call", {})
    out["tools_call.memory_task_vs_sdk_plain"] = goal(
        (
            calls.get("memory", {}).get("server_cpu_us_per_request"),
            calls.get(SDK, {}).get("server_cpu_us_per_request"),
        ),
        "<=",
        1.3,
        absent("memory"),
        ONE_CALL,
    )
    # The create request alone (its task created for workers, run by none): what the
    # request itself costs, beside the whole task above; the plain call also runs the tool.
    out["tools_call.memory_create_vs_sdk_plain"] = reported(
        (
            calls.get(CREATE_ONLY, {}).get("server_cpu_us_per_request"),
            calls.get(SDK, {}).get("server_cpu_us_per_request"),
        ),
        absent("memory"),
        ONE_CALL,
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
        sized_up = results.get("scale_ops", {}).get(name, {})
        if name in DURABLE:
            for op in scale.OPERATIONS:
                out[f"scale_ops.{name}.{op}_large_vs_small"] = goal(
                    (
                        sized_up.get("large", {}).get(f"{op}_us"),
                        sized_up.get("small", {}).get(f"{op}_us"),
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


def store_sections(
    backend: Backend, fresh: Callable[[], str], sized: dict[str, Any], results: dict[str, Any]
) -> None:
    """Sections 3 and 4 on one backend, each on a fresh namespace, into ``results``."""
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
    if backend.name in DURABLE:
        results["scale_ops"][backend.name] = scale_ops(backend.name, fresh, sized)


def scale_ops(name: str, fresh: Callable[[], str], sized: dict[str, Any]) -> dict[str, Any]:
    """Section 4c on a durable store (``bench/scale.py``) at the run's sizes."""
    print(f"4c. {name}: every operation, small and large table", flush=True)
    return asyncio.run(
        scale.section(
            fresh,
            sized["scale_small"],
            sized["scale_large"],
            sized["scale_ops"],
            sized["scale_seed_budget_s"],
            sized["scale_expired"],
        )
    )


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
        # The peer's worker runs as many tasks at once as the workload keeps in flight.
        results["settings"]["peer_concurrency"] = config["e2e_in_flight"]
        targets = served.targets(
            backends.available, fastmcp_python, concurrency=config["e2e_in_flight"]
        )
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
            print("1b. idle CPU per server (nothing asked)", flush=True)
            results["idle_cpu"] = served.idle_cpu(targets, pids, seconds=config["idle_seconds"])
            print("2. CPU per completed task, end to end", flush=True)
            results["cpu_per_task"] = served.cpu_per_task(
                targets,
                pids,
                tasks=config["e2e_tasks"],
                in_flight=config["e2e_in_flight"],
                tool_ms=config["e2e_tool_ms"],
                poll_ms=config["e2e_poll_ms"],
            )
            print(
                "2b. a task-creating tools/call (the whole task, the create alone) against a"
                " plain one, under wrk",
                flush=True,
            )
            results["tools_call"] = served.tools_call_cpu(
                targets,
                pids,
                seconds=config["wrk_seconds"],
                connections=config["wrk_connections"],
                rounds=config["wrk_rounds"],
            )
            if not args.no_profile:
                served.profile_creates(
                    targets, pids, seconds=config["wrk_seconds"], directory=args.out
                )

        for section in ("store_ops", "scale", "near_cap", "scale_ops"):
            results[section] = {}
        for backend in backends.available:
            fresh = namespace_factory(stack, directory, backend)
            sized = backend.sized(config)  # smaller on a slow server (bench/common.py)
            if backend.at_most:
                results["settings"].setdefault("at_most", {})[backend.name] = backend.at_most
            store_sections(backend, fresh, sized, results)
        print("5. memory", flush=True)
        results["memory"] = memory.measure(config["memory_tasks"])

    results["floor"] = {
        name: dict(zip(("cpu_ms_per_task", "requests_per_task"), floor(results, name), strict=True))
        for name in results["cpu_per_task"]
        if name in ALL
    }
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


def requests_beside(entry: dict[str, Any]) -> str:
    """The requests behind a ratio's two figures, ``a | b``, each by method (per task, or
    per measured request for a capacity); empty for a ratio of no requests."""
    pair = entry.get("requests")
    if pair is None:
        return ""
    return " | ".join("—" if side is None else served.requests_text(side) for side in pair)


def markdown_table(table: dict[str, dict[str, Any]]) -> str:
    """The goals as a Markdown table (for docs/performance.md)."""
    rows = [
        "| goal | measured | target | requests per task (a \\| b) | result |",
        "| --- | ---: | --- | --- | --- |",
    ]
    for name, entry in table.items():
        measured = "—" if entry["measured"] is None else f"{entry['measured']:.2f}"
        beside = requests_beside(entry).replace("|", "\\|")
        result = verdict(entry, "**missed**")
        rows.append(f"| `{name}` | {measured} | {entry['goal']} | {beside} | {result} |")
    return "\n".join(rows) + "\n"


def print_table(table: dict[str, dict[str, Any]]) -> None:
    width = max(len(requests_beside(entry)) for entry in table.values()) + 2
    print(f"\n{'goal':<48}{'measured':>9}  {'goal':<9}{'requests per task (a | b)':<{width}}result")
    for name, entry in table.items():
        measured = "—" if entry["measured"] is None else f"{entry['measured']:.3f}"
        beside, result = requests_beside(entry), verdict(entry, "MISSED")
        print(f"{name:<48}{measured:>9}  {entry['goal']:<9}{beside:<{width}}{result}")


if __name__ == "__main__":
    main()
