"""The cost of encryption at rest, alone: our server on each store with and without a key.

    uv run --group bench python -m bench.encryption --quick   # a small run (about a minute)

Section 1 (``tasks/get`` capacity under wrk) and section 2 (CPU per completed task, server
and database) of ``bench/run.py``, on our servers only (``served.ours``: each store plain
and ``encrypted``, the same server with ``$MCP_TASKS_ENCRYPTION_KEYS``); the full suite
measures the same rows beside everything else. Writes ``bench/results/encryption.json``
and prints, per store, each figure and the encrypted / plain ratio.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench import served
from bench.common import ROOT, find_backends
from bench.run import settings


def table(results: dict[str, Any], names: list[str]) -> list[str]:
    """One line per store: req/s of tasks/get and CPU ms per task, plain and encrypted."""
    polls, cpu = results["poll_capacity"], results["cpu_per_task"]
    lines = [
        f"{'store':<10}{'tasks/get req/s':>18}{'encrypted':>12}{'ratio':>8}"
        f"{'CPU ms/task':>14}{'encrypted':>12}{'ratio':>8}"
    ]
    for name in names:
        sealed = name + served.ENCRYPTED
        rps = (polls[name]["requests_per_s"], polls[sealed]["requests_per_s"])
        ms = (cpu[name]["cpu_ms_per_task"], cpu[sealed]["cpu_ms_per_task"])
        lines.append(
            f"{name:<10}{rps[0]:>18,.0f}{rps[1]:>12,.0f}{rps[1] / rps[0]:>8.3f}"
            f"{ms[0]:>14.2f}{ms[1]:>12.2f}{ms[1] / ms[0]:>8.3f}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small run")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--backends", nargs="*", help="default: every available")
    args = parser.parse_args()
    config = settings(args.quick)
    results: dict[str, Any] = {"settings": {**config, "quick": args.quick}}
    with ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        backends = find_backends(stack, directory, args.backends)
        results["missing"] = backends.missing
        targets = served.ours(backends.available)
        with served.all_started(targets) as pids:
            print("1. tasks/get capacity under wrk", flush=True)
            results["poll_capacity"] = served.poll_capacity(
                targets,
                pids,
                seconds=config["wrk_seconds"],
                connections=config["wrk_connections"],
                rounds=config["wrk_rounds"],
                profile_dir=None,
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
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "encryption.json").write_text(json.dumps(results, indent=2) + "\n")
    print("\n".join(table(results, [b.name for b in backends.available])))


if __name__ == "__main__":
    main()
