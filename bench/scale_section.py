"""Section 4c and what scales beside it, on its own (``bench/results/scale.json``):

    uv run --group bench python -m bench.scale_section [--parts ops processes remote]

* ``ops``: every store operation at 1 k, 100 k and 1 M rows (``bench/scale.py``); MongoDB
  at 1 k and 10 k (the embedded SecantusDB server, a test server, holds about 10 k);
* ``processes``: completed tasks per second with 1, 2 and 4 ``mcp-tasks serve`` processes
  and with 2 ``mcp-tasks worker``s on one store (``bench/scale_processes.py``);
* ``remote``: the round trips of each store operation to a store on another host
  (``bench/remote_store.py``);
* ``listen``: 1,000 open ``subscriptions/listen`` streams on 1 and on 4 processes, the
  latency of a change's notification and the memory per stream (``bench/listen_streams.py``).

Each part's figures replace that part's in ``scale.json`` (the others stay), with the
goals they meet or miss (``ratios``, also as the table ``scale.md``) and the machine's load
average when they were taken; ``ops`` writes each store's as soon as it is measured, so a
store that fails keeps the figures of those measured before it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench import scale
from bench.common import ROOT, find_backends, namespace_factory
from bench.run import goal, markdown_table

PARTS = ("ops", "processes", "remote", "listen")
#: The stores measured at every size.
HUGE = ("sqlite", "postgres", "redis")
#: The stores measured at the small size and at a large one of their own (no huge size):
#: name → the large size. The embedded MongoDB server writes about 10 k rows in the time
#: the others write 1 M.
SMALLER = {"mongodb": 10_000}
#: The goal of each operation's large figure over its small one, per store.
RATIO_GOAL = {"mongodb": 2.0}
#: The run's sizes of ``ops`` (``--quick``: a smoke run).
SIZES = {"small": 1_000, "large": 100_000, "huge": 1_000_000, "ops": 500, "expired": 2_000}
QUICK = {"small": 1_000, "large": 5_000, "huge": 20_000, "ops": 200, "expired": 300}
#: Seconds of seeding each size may take at most (``rows`` says how many were reached).
SEED_BUDGET_S = 900


def ops_part(
    stack: ExitStack,
    directory: Path,
    sizes: dict[str, int],
    settle_s: float,
    stores: list[str] | None = None,
) -> dict[str, Any]:
    """Section 4c on each store of :data:`HUGE`: small, large and huge, each measured
    ``settle_s`` after its seeding (``bench.scale.SETTLE_S``); on each of :data:`SMALLER`,
    small and its own large size (at most the run's). ``stores``: only those."""
    backends = find_backends(stack, directory, stores or [*HUGE, *SMALLER])
    found: dict[str, Any] = {"missing": backends.missing}
    for backend in backends.available:
        large = min(SMALLER.get(backend.name, sizes["large"]), sizes["large"])
        huge = None if backend.name in SMALLER else sizes["huge"]
        print(
            f"4c. {backend.name}: every operation at {sizes['small']:,}, {large:,}"
            + ("" if huge is None else f" and {huge:,}")
            + " rows",
            flush=True,
        )
        found[backend.name] = asyncio.run(
            scale.section(
                namespace_factory(stack, directory, backend),
                sizes["small"],
                large,
                sizes["ops"],
                SEED_BUDGET_S,
                sizes["expired"],
                huge=huge,
                settle_s=settle_s,
            )
        )
    return found


def ops_ratios(found: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each operation's latency at the large and the huge size over the small (≤ 1.3; on
    :data:`SMALLER`, the large size's only, ≤ :data:`RATIO_GOAL`)."""
    out = {}
    for name in (*HUGE, *SMALLER):
        measured = found.get(name, {})
        for size in ("large",) if name in SMALLER else ("large", "huge"):
            for op in scale.OPERATIONS:
                figures = (
                    measured.get(size, {}).get(f"{op}_us"),
                    measured.get("small", {}).get(f"{op}_us"),
                )
                out[f"scale_ops.{name}.{op}_{size}_vs_small"] = goal(
                    figures, "<=", RATIO_GOAL.get(name, 1.3), found.get("missing", {}).get(name)
                )
    return out


def jobs(parts: list[str], stores: list[str] | None) -> list[tuple[str, list[str] | None]]:
    """Each part to run with the stores it measures: ``ops`` once per store (``stores``,
    else every one), each written on its own; the other parts once, on every store."""
    found: list[tuple[str, list[str] | None]] = []
    for part in parts:
        if part == "ops":
            found += [(part, [name]) for name in stores or [*HUGE, *SMALLER]]
        else:
            found.append((part, None))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="*", choices=PARTS, default=list(PARTS))
    parser.add_argument("--quick", action="store_true", help="a small run (a smoke test)")
    parser.add_argument(
        "--stores", nargs="*", choices=[*HUGE, *SMALLER], help="ops: only these stores"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "scale.json")
    args = parser.parse_args()
    for part, stores in jobs(args.parts, args.stores):
        started, load = time.perf_counter(), os.getloadavg()
        with ExitStack() as stack:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            if part == "ops":
                found = ops_part(
                    stack,
                    directory,
                    QUICK if args.quick else SIZES,
                    settle_s=0 if args.quick else scale.SETTLE_S,
                    stores=stores,
                )
            elif part == "processes":
                from bench import scale_processes  # noqa: PLC0415 - one part's module

                found, ratios = scale_processes.part(stack, directory, quick=args.quick)
            elif part == "remote":
                from bench import remote_store  # noqa: PLC0415 - one part's module

                found, ratios = remote_store.part(stack, directory, quick=args.quick)
            else:
                from bench import listen_streams  # noqa: PLC0415 - one part's module

                found, ratios = listen_streams.part(stack, directory, quick=args.quick)
        found["machine"] = {
            "cpus": os.cpu_count(),
            "load_before": [round(x, 2) for x in load],
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "seconds": round(time.perf_counter() - started, 1),
            "quick": args.quick,
        }
        # Read again now: another part's run may have written meanwhile.
        results: dict[str, Any] = json.loads(args.out.read_text()) if args.out.exists() else {}
        results.setdefault("ratios", {})
        if part == "ops" and stores:
            # the stores not run keep their figures of the last run (with its machine's)
            kept_ops = results.get("ops", {})
            earlier = {name: kept_ops[name] for name in [*HUGE, *SMALLER] if name in kept_ops}
            for name in stores:
                earlier.pop(name, None)
            machines = {
                **kept_ops.get("machines", {}),
                **dict.fromkeys(stores, found["machine"]),
            }
            for name in earlier:
                machines.setdefault(name, kept_ops.get("machine"))
            missing = {k: v for k, v in kept_ops.get("missing", {}).items() if k not in found}
            found = {**earlier, **found, "machines": machines}
            found["missing"] = {**missing, **found.get("missing", {})}
        if part == "ops":
            ratios = ops_ratios(found)
        results[part] = found
        prefix = {
            "ops": "scale_ops.",
            "processes": "processes.",
            "remote": "remote.",
            "listen": "listen.",
        }[part]
        kept = {k: v for k, v in results["ratios"].items() if not k.startswith(prefix)}
        results["ratios"] = {**kept, **ratios}
        args.out.write_text(json.dumps(results, indent=2) + "\n")
        args.out.with_suffix(".md").write_text(markdown_table(results["ratios"]))
        for name, entry in ratios.items():
            print(
                f"  {name:<52}{entry['measured']!s:>8}  {entry['goal']:<8}"
                f" {entry['met']}  {entry.get('note', '')}"
            )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
