"""The fault tests at a larger size than CI's (packages/mcp-tasks/tests/durable): the
randomized crash test on every durable store (100 tasks, 10 SIGKILLs over 30 s) and the soak
on memory, SQLite and Postgres (20,000 tasks).

Runs them through pytest with the sizes in the environment, prints the figures each run
prints (tasks, kills, answers, how long after the last kill the last task ended; the soak's
time and resident memory) and writes them to ``bench/results/faults.json`` (and, when a
test failed, pytest's whole output to ``bench/results/faults.log``). Exits non-zero when a
test failed: these are the tests' verdicts, not timings.

    uv run python -m bench.faults
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from bench.common import ROOT

TESTS = ROOT / "packages" / "mcp-tasks" / "tests" / "durable"
SIZES = {
    "MCP_TASKS_CRASH_TASKS": "100",
    "MCP_TASKS_CRASH_KILLS": "10",
    "MCP_TASKS_CRASH_CHAOS_S": "30",
    "MCP_TASKS_SOAK_TASKS": "20000",
}
#: The lines the tests print with their figures.
FIGURES = ("random crashes ", "soak ")


def main() -> int:
    started = time.monotonic()
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(TESTS / "test_random_crashes.py"),
            str(TESTS / "test_soak.py"),
            "-n",
            "0",
            "-s",
            "-q",
            "-rA",
        ],
        cwd=ROOT,
        env={**os.environ, **SIZES},
        capture_output=True,
        text=True,
        check=False,
    )
    # pytest's progress marks (".", "F") may precede a line a test printed.
    printed = [line.lstrip(".FE") for line in run.stdout.splitlines()]
    figures = [line for line in printed if line.startswith(FIGURES)]
    outcome = [line for line in run.stdout.splitlines() if line.startswith(("PASSED", "FAILED"))]
    report = {
        "sizes": SIZES,
        "figures": figures,
        "outcome": outcome,
        "passed": run.returncode == 0,
        "seconds": round(time.monotonic() - started, 1),
    }
    results = ROOT / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "faults.json").write_text(json.dumps(report, indent=2) + "\n")
    print("\n".join([*figures, *outcome, f"{report['seconds']} s"]))
    if run.returncode != 0:
        log = results / "faults.log"
        log.write_text(run.stdout + run.stderr)
        print(f"the whole output of the failed run: {log}", file=sys.stderr)
    return run.returncode


if __name__ == "__main__":
    raise SystemExit(main())
