"""Sections 1 and 2: the servers over HTTP, each its own process.

1. Poll capacity: ``tasks/get`` requests per second under ``wrk`` (1 thread, 50
   connections) on one completed task, and the CPU per request of the server and of the
   database processes serving it, for our server on each store and for fastmcp-tasks 4.1.4
   on its memory backend and on Redis; the SDK's trivial ``tools/call`` and a bare Starlette
   JSON-RPC route beside them as floors.
2. CPU per task: the end-to-end workload (``tasks`` tasks of a ``tool_ms`` tool that reports
   progress once, ``in_flight`` at once, each polled every ``poll_ms``): the CPU time of the
   server and of its database per completed task, the requests the server answered per task
   (counted by the client, by method), and the create latency (p50, p99); the same tool as a
   plain ``tools/call`` on the SDK (the floor's call). Then, under ``wrk``, a task-creating
   ``tools/call`` on memory beside the SDK's plain ``tools/call`` of the same tool.

Between them (1b), each server's CPU while idle, as a share of one core.

Every server runs under ``uvicorn.run(app)`` (what ``uvicorn module:app`` runs) on the stack
``pip install uvicorn`` gives: the asyncio loop and h11. Section 1 adds our memory server as
``mcp-tasks serve`` serves it, and the production stack (``uvicorn[standard]``'s uvloop and
httptools) for our memory server, the peer on memory and both floors. Each row names how it
was served and the loop and HTTP parser its server reported running on (``bench/stack.py``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import (
    ROOT,
    Backend,
    Connection,
    Usage,
    free_port,
    median,
    our_server,
    percentile,
    request_body,
    request_headers,
    server_process,
)
from bench.stack import ENV as STACK_FILE
from bench.stack import label
from mcp_tasks.stores.encrypted import KEYS_ENV, new_key

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator, Sequence

FASTMCP_TASKS = "fastmcp-tasks==4.1.4"
FASTMCP_VENV = ROOT / ".cache" / "bench" / "fastmcp-tasks"


#: The peer on its production backend, Redis: the row name of its figures.
PEER = "fastmcp-tasks"
PEER_REDIS = "fastmcp-tasks redis"
SDK = "sdk tools/call"
BARE = "bare starlette"
#: Section 1's rows of our memory server under ``mcp-tasks serve``, and of the production
#: stack (a suffix to the name of the row it doubles).
SERVE = "memory serve"
UVLOOP = " uvloop"
#: The suffix of a row of ours with encryption at rest on (``$MCP_TASKS_ENCRYPTION_KEYS``).
ENCRYPTED = " encrypted"

#: How a server is started: ``uvicorn.run(app)`` (``python -m bench.servers``, the peer's
#: script) or our CLI.
UVICORN_RUN = "uvicorn.run"
MCP_TASKS_SERVE = "mcp-tasks serve"


@dataclass
class Target:
    """A server to measure: how to start it, and which request to repeat."""

    name: str
    argv: list[str]
    port: int
    kind: str  #: "tasks" (a task tool nap + tasks/get), "sdk" (plain nap, echo), "bare"
    store: str = "memory"  #: the store kind, for its database processes (``Usage``)
    database_url: str = ""  #: the database server's URL (none in process)
    key_prefix: str | None = None  #: the peer's Docket keys on Redis, deleted at the end
    way: str = UVICORN_RUN  #: how it is served
    capacity_only: bool = False  #: a row of section 1 (and idle CPU) alone
    #: the server's environment beside ours (the encryption keys of an ``ENCRYPTED`` row)
    env: dict[str, str] = field(default_factory=dict)
    #: the loop and HTTP parser it reported running on (``bench/stack.py``), once started
    stack: dict[str, str] | None = None

    @property
    def label(self) -> str:
        """How the row was served: ``uvicorn.run · asyncio loop · h11``."""
        running = self.stack or {"loop": "?", "http": "?"}
        return label(self.way, running)

    def usage(self, pid: int) -> Usage:
        """A CPU meter of this server (process ``pid``) and of its database's processes."""
        return Usage(pid, self.store, self.database_url)


def ensure_wrk() -> str:
    """The wrk binary, installed from the Debian packages when missing."""
    found = shutil.which("wrk")
    if found is None:
        subprocess.run(["apt-get", "install", "-y", "-q", "wrk"], check=True)
        found = shutil.which("wrk")
    if found is None:
        raise RuntimeError("wrk is not installed and apt-get could not install it")
    return found


def ensure_fastmcp_tasks() -> Path:
    """The Python of fastmcp-tasks' own virtualenv (``uv venv`` + ``uv pip install``)."""
    python = FASTMCP_VENV / "bin" / "python"
    imports = "import fastmcp_tasks, uvicorn, uvloop, httptools"
    probe = [str(python), "-c", f"{imports}; print(fastmcp_tasks.__version__)"]
    if python.exists():
        done = subprocess.run(probe, capture_output=True, text=True, check=False)
        if done.returncode == 0 and done.stdout.strip() == FASTMCP_TASKS.split("==")[1]:
            return python
    subprocess.run(["uv", "venv", "-q", "--allow-existing", str(FASTMCP_VENV)], check=True)
    install = ["uv", "pip", "install", "-q", "--python", str(python), FASTMCP_TASKS]
    install += ["uvicorn", "uvloop", "httptools"]  # its production stack as ours
    subprocess.run(install, check=True)
    return python


def targets(
    backends: Sequence[Backend], fastmcp_python: Path | None, concurrency: int = 50
) -> list[Target]:
    """Every server of sections 1 and 2: ours per store; fastmcp-tasks on its memory
    backend and, when Redis is here, on Redis (its worker running ``concurrency`` tasks at
    once: the workload's in-flight count); the two floors. Then section 1's own rows: ours
    on memory under ``mcp-tasks serve``, and the production stack (uvloop, httptools) for
    ours on memory, the peer on memory and the two floors."""
    found = ours(backends)
    redis = next((b for b in backends if b.name == "redis"), None)
    if fastmcp_python is not None:
        peers: list[tuple[str, str, str, str | None]] = [(PEER, "memory://", "memory", None)]
        if redis is not None and redis.base is not None:
            queue = "mcpt_bench_peer_" + secrets.token_hex(4)
            peers.append((PEER_REDIS, redis.base, "redis", queue))
        for name, url, store, prefix in peers:
            port = free_port()
            argv = [str(fastmcp_python), "-m", "bench.fastmcp_tasks_server", "--port", str(port),
                    "--url", url, "--concurrency", str(concurrency)]  # fmt: skip
            if prefix is not None:
                argv += ["--name", prefix]
            found.append(Target(name, argv, port, "tasks", store, url, prefix))
    for kind, name in (("sdk", SDK), ("bare", BARE)):
        port = free_port()
        argv = [sys.executable, "-m", "bench.servers", "sdk" if kind == "sdk" else "starlette"]
        found.append(Target(name, [*argv, "--port", str(port)], port, kind))
    return found + production_rows(found)


def ours(backends: Sequence[Backend]) -> list[Target]:
    """Our server on each store, and again with encryption at rest on (a row named with
    :data:`ENCRYPTED`: the same server with a key in ``$MCP_TASKS_ENCRYPTION_KEYS``, on the
    same namespace; each server runs the tasks it creates)."""
    found = []
    keys = {KEYS_ENV: f"bench:{new_key()}"}
    for backend in backends:
        where = backend.base or backend.url
        for suffix, env in (("", {}), (ENCRYPTED, keys)):
            port = free_port()
            argv = our_server(backend, port)
            name = backend.name + suffix
            found.append(Target(name, argv, port, "tasks", backend.name, where, env=env))
    return found


def production_rows(defaults: Sequence[Target]) -> list[Target]:
    """Section 1's own rows: our memory server under ``mcp-tasks serve``, and each of ours
    on memory, the peer on memory and the floors again on uvloop and httptools."""
    rows = []
    memory = next((t for t in defaults if t.name == "memory"), None)
    if memory is not None:
        port = free_port()
        cli = str(Path(sys.executable).parent / "mcp-tasks")
        argv = [cli, "serve", "bench.serve_app:mcp", "--store", "memory://", "--port", str(port),
                "--log-level", "warning"]  # fmt: skip
        rows.append(Target(SERVE, argv, port, "tasks", way=MCP_TASKS_SERVE, capacity_only=True))
    for target in defaults:
        if target.name in ("memory", PEER, SDK, BARE):
            port = free_port()
            argv = [*with_port(target.argv, port), "--stack", "uvloop"]
            name = target.name + UVLOOP
            rows.append(Target(name, argv, port, target.kind, capacity_only=True))
    return rows


def with_port(argv: Sequence[str], port: int) -> list[str]:
    """``argv`` with its ``--port`` value replaced by ``port``."""
    out = list(argv)
    out[out.index("--port") + 1] = str(port)
    return out


async def completed_task(port: int) -> str:
    """The id of a finished ``nap`` task on the server at ``port``."""
    conn = Connection(port)
    try:
        created = await conn.call("tools/call", {"name": "nap", "arguments": {"ms": 0}}, "nap")
        task_id: str = created["result"]["taskId"]
        for _ in range(200):
            got = await conn.call("tasks/get", {"taskId": task_id}, task_id)
            if got["result"]["status"] == "completed":
                return task_id
            await asyncio.sleep(0.05)
        raise RuntimeError("the nap task did not complete")
    finally:
        await conn.close()


def repeated_request(target: Target) -> tuple[str, dict[str, Any], str | None]:
    """The method, params and Mcp-Name of the request wrk repeats on ``target``."""
    if target.kind == "tasks":
        task_id = asyncio.run(completed_task(target.port))
        return "tasks/get", {"taskId": task_id}, task_id
    if target.kind == "sdk":
        return "tools/call", {"name": "echo", "arguments": {"text": "hi"}}, "echo"
    return "tasks/get", {"taskId": "x"}, "x"


def check_answer(target: Target, method: str, params: dict[str, Any], name: str | None) -> None:
    """One request by hand: the server answers it with a result (not an error)."""

    async def once() -> Any:
        conn = Connection(target.port)
        try:
            return await conn.call(method, params, name)
        finally:
            await conn.close()

    answer = asyncio.run(once())
    if "result" not in answer:
        raise RuntimeError(f"{target.name}: {method} answered {answer}")


LUA = """wrk.method = "POST"
wrk.body = {body}
{headers}
"""


def wrk_script(method: str, params: dict[str, Any], name: str | None, directory: Path) -> Path:
    lines = [
        f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}"
        for k, v in request_headers(method, name).items()
    ]
    body = request_body(method, params).decode()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "request.lua"
    path.write_text(LUA.format(body=json.dumps(body), headers="\n".join(lines)))
    return path


def run_wrk(wrk: str, port: int, script: Path, seconds: float, connections: int) -> float:
    """Requests per second; any non-2xx answer or socket error fails the run. A request
    may take up to 30 s (wrk's default is 2 s, which a server on a busy machine can miss
    without failing anything)."""
    argv = [wrk, "-t1", f"-c{connections}", f"-d{seconds:g}s", "--timeout", "30s"]
    argv += ["-s", str(script)]
    done = subprocess.run(
        [*argv, f"http://127.0.0.1:{port}/mcp"], capture_output=True, text=True, check=True
    )
    out = done.stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"wrk saw failures:\n{out}")
    match = re.search(r"Requests/sec:\s*([\d.]+)", out)
    if match is None:
        raise RuntimeError(f"no Requests/sec in wrk's output:\n{out}")
    return float(match.group(1))


@contextmanager
def all_started(targets_: Sequence[Target]) -> Iterator[dict[str, int]]:
    """Every target's server running at once (idle ones cost next to nothing); yields the
    pid of each by name. The peer's keys on Redis are deleted when the servers stop."""
    missing = [m for m in ("uvloop", "httptools") if importlib.util.find_spec(m) is None]
    if missing:  # else the production stack's rows fail as they start, less clearly
        raise RuntimeError(
            f"the production stack's rows need {' and '.join(missing)}: run the bench with"
            " `uv run --group bench` (or `nox -s bench`)"
        )
    with ExitStack() as servers, tempfile.TemporaryDirectory() as tmp:
        for target in targets_:
            if target.key_prefix is not None:
                servers.callback(drop_keys, target.database_url, target.key_prefix)
        yield {t.name: started(servers, t, Path(tmp)) for t in targets_}


#: How long a started server may take to report its stack (its app's start-up).
STACK_REPORT_S = 60.0


def started(servers: ExitStack, target: Target, directory: Path) -> int:
    """Start ``target``'s server until ``servers`` ends; its pid. Its loop and HTTP parser,
    as it reports them once its app has started, become ``target.stack``."""
    report = directory / f"stack-{target.port}.json"
    env = {**target.env, STACK_FILE: str(report)}
    process = servers.enter_context(server_process(target.argv, target.port, env=env))
    deadline = time.monotonic() + STACK_REPORT_S
    while not report.exists() or not report.read_text():
        if time.monotonic() > deadline or process.poll() is not None:
            raise RuntimeError(f"{target.name}: its server reported no loop and HTTP parser")
        time.sleep(0.05)
    target.stack = json.loads(report.read_text())
    print(f"  {target.name:<24}{target.label}", flush=True)
    return process.pid


def drop_keys(url: str, prefix: str) -> None:
    """Delete the keys of ``prefix`` on the Redis at ``url`` (a clean-up: the peer's)."""

    async def drop() -> None:
        from redis.asyncio import Redis  # noqa: PLC0415 (the Redis store's driver)

        client = Redis.from_url(url)
        try:
            async for key in client.scan_iter(match=f"*{prefix}*", count=1000):
                await client.delete(key)
        finally:
            await client.aclose()

    asyncio.run(drop())


def wrk_rounds(
    wrk: str,
    runs: Sequence[tuple[Target, int, Path]],
    *,
    seconds: float,
    connections: int,
    rounds: int,
) -> dict[str, dict[str, Any]]:
    """Per ``(target, pid, wrk script)``: how it was served (``served``), requests/s of
    the script's request (the best of
    ``rounds`` rounds, the targets taking turns, so a burst of load elsewhere on the machine
    hits one round, not one target) and, in that round, the CPU per request of the server and
    of its database's processes (``None``: not readable), and their sum."""
    results: dict[str, dict[str, Any]] = {}
    for round_ in range(rounds):
        for target, pid, script in runs:
            usage = target.usage(pid)
            usage.start()
            rps = run_wrk(wrk, target.port, script, seconds, connections)
            usage.stop()
            requests = rps * seconds
            print(
                f"  round {round_ + 1}: {target.name:<24}{rps:>10,.0f} req/s  ({target.label})",
                flush=True,
            )
            best = results.get(target.name, {}).get("requests_per_s") or 0.0
            if rps > best:
                database = usage.database_s
                results[target.name] = {
                    "served": target.label,
                    "requests_per_s": rps,
                    "server_cpu_us_per_request": usage.server_s / requests * 1e6,
                    "database_cpu_us_per_request": (
                        None if database is None else database / requests * 1e6
                    ),
                    "cpu_us_per_request": usage.total_s / requests * 1e6,
                }
    return results


def poll_capacity(
    targets_: Sequence[Target],
    pids: dict[str, int],
    *,
    seconds: float,
    connections: int,
    rounds: int,
    profile_dir: Path | None,
) -> dict[str, dict[str, Any]]:
    """Section 1: per target, requests/s of its repeated request and its CPU per request
    (``wrk_rounds``)."""
    wrk = ensure_wrk()
    with tempfile.TemporaryDirectory() as tmp:
        scripts = {}
        for target in targets_:
            method, params, name = repeated_request(target)
            check_answer(target, method, params, name)
            scripts[target.name] = wrk_script(method, params, name, Path(tmp) / target.name)
            run_wrk(wrk, target.port, scripts[target.name], 1, connections)  # warm-up
        runs = [(t, pids[t.name], scripts[t.name]) for t in targets_]
        results = wrk_rounds(wrk, runs, seconds=seconds, connections=connections, rounds=rounds)
        memory = next((t for t in targets_ if t.name == "memory"), None)
        if profile_dir is not None and memory is not None:
            profile(
                wrk,
                memory.port,
                scripts["memory"],
                pid=pids["memory"],
                directory=profile_dir,
                seconds=seconds,
                name="tasks_get_memory",
                what="tasks/get",
            )
    return results


#: Started is not yet idle: lazy imports, the first sweeps, connections of a pool.
IDLE_SETTLE_S = 2.0


def idle_cpu(
    targets_: Sequence[Target], pids: dict[str, int], *, seconds: float
) -> dict[str, dict[str, Any]]:
    """Section 1b: each server's own CPU while nobody asks it anything (after section 1, so
    every one has started and served), as a percentage of one core over ``seconds``, all
    measured at once. A database server is not counted: its CPU serves every client."""
    time.sleep(IDLE_SETTLE_S)
    usages = {t.name: Usage(pids[t.name]) for t in targets_}
    labels = {t.name: t.label for t in targets_}
    for usage in usages.values():
        usage.start()
    time.sleep(seconds)
    results = {}
    for name, usage in usages.items():
        percent = usage.stop().server_s / seconds * 100
        print(f"  {name:<24}{percent:>8.2f} % of a core  ({labels[name]})", flush=True)
        results[name] = {"served": labels[name], "cpu_percent_of_core": round(percent, 2)}
    return results


def profile_creates(
    targets_: Sequence[Target], pids: dict[str, int], *, seconds: float, directory: Path
) -> None:
    """The create path's profile: py-spy on the memory server while wrk sends task-creating
    ``tools/call``s of ``nap`` (0 ms: each task also runs and completes), 50 at a time, as
    the end-to-end workload's first wave does (``tools_call_memory.summary.txt``)."""
    memory = next((t for t in targets_ if t.name == "memory"), None)
    if memory is None:
        return
    with tempfile.TemporaryDirectory() as tmp:
        params = {"name": "nap", "arguments": {"ms": 0}}
        script = wrk_script("tools/call", params, "nap", Path(tmp))
        profile(
            ensure_wrk(),
            memory.port,
            script,
            pid=pids["memory"],
            directory=directory,
            seconds=seconds,
            name="tools_call_memory",
            what="tools/call creating a task",
        )


def profile(
    wrk: str,
    port: int,
    script: Path,
    *,
    pid: int,
    directory: Path,
    seconds: float,
    name: str,
    what: str,
) -> None:
    """A py-spy sampling profile of the server while wrk drives it: collapsed stacks
    (``name.collapsed.txt``) and a summary of the functions with the most samples, own and
    inclusive (``name.summary.txt``)."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    raw = directory / f"{name}.collapsed.txt"
    record = subprocess.Popen(
        [py_spy, "record", "-p", str(pid), "-d", f"{seconds:g}", "-r", "200", "-f", "raw",
         "-o", str(raw), "--nonblocking"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(0.5)
    run_wrk(wrk, port, script, seconds, 50)
    record.wait(60)
    if raw.exists():
        (directory / f"{name}.summary.txt").write_text(summarise(raw, what=what))


def summarise(raw: Path, top: int = 25, *, what: str = "tasks/get") -> str:
    """Where the samples went, from collapsed stacks: own samples by package (the first part
    of the file's path: uvicorn, starlette, mcp, mcp_tasks, pydantic, asyncio, …) and by
    function, and inclusive samples by function."""
    own: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        total += count
        frames = [function(f) for f in stack.split(";")]
        own[frames[-1]] += count
        packages[frames[-1].partition("(")[2].partition("/")[0].rstrip(")") or "?"] += count
        for frame in set(frames):
            inclusive[frame] += count
    lines = [f"{total} samples of the server under wrk ({what}, memory store)", ""]
    for title, counter in (
        ("own, by package:", packages),
        ("own, by function:", own),
        ("inclusive, by function:", inclusive),
    ):
        lines.append(title)
        shown = counter.most_common(top * 2 if counter is inclusive else top)
        lines += [f"  {100 * n / total:5.1f}%  {f}" for f, n in shown]
        lines.append("")
    return "\n".join(lines)


def function(frame: str) -> str:
    """``name (package/module.py)`` of a py-spy frame: the path from its package on, no line."""
    name, _, where = frame.partition(" (")
    path = re.sub(r"^.*/(site-packages|src|python3\.\d+)/", "", where.rpartition(":")[0])
    return f"{name} ({path})"


async def drive(
    port: int,
    tasks: int,
    in_flight: int,
    tool_ms: int,
    poll_ms: int,
    *,
    counts: Counter[str] | None = None,
) -> list[tuple[float, float]]:
    """The end-to-end workload; each create's ``(sent, answered)`` (``perf_counter`` s).
    ``counts`` receives the requests sent, by method (each was answered: an error raises)."""
    todo = iter(range(tasks))
    created: list[tuple[float, float]] = []
    sent_count: Counter[str] = Counter() if counts is None else counts

    async def client(conn: Connection) -> None:
        for _ in todo:
            sent = time.perf_counter()
            answer = await conn.call(
                "tools/call", {"name": "nap", "arguments": {"ms": tool_ms}}, "nap"
            )
            sent_count["tools/call"] += 1
            created.append((sent, time.perf_counter()))
            task_id = answer["result"]["taskId"]
            while True:
                await asyncio.sleep(poll_ms / 1000)
                got = await conn.call("tasks/get", {"taskId": task_id}, task_id)
                sent_count["tasks/get"] += 1
                status = got["result"]["status"]
                if status == "completed":
                    break
                if status != "working":
                    raise RuntimeError(f"a task ended {status}")

    await each_connected(port, in_flight, client)
    return created


async def each_connected(
    port: int, count: int, client: Callable[[Connection], Awaitable[None]]
) -> None:
    """Run ``client`` on each of ``count`` connections to ``port``, all open before the first
    request is sent: a request's latency is from its send to its answer, not the TCP connect
    and accept before it."""
    conns = [Connection(port) for _ in range(count)]
    try:
        await asyncio.gather(*(conn.connect() for conn in conns))
        await asyncio.sleep(0.05)  # the server's accepts settle
        await asyncio.gather(*(client(conn) for conn in conns))
    finally:
        await asyncio.gather(*(conn.close() for conn in conns))


async def drive_plain(
    port: int, calls: int, in_flight: int, tool_ms: int, *, counts: Counter[str] | None = None
) -> None:
    """The workload's tool as plain ``tools/call``s (no task): ``calls`` of them,
    ``in_flight`` at once, each answered with the tool's result."""
    todo = iter(range(calls))
    sent_count: Counter[str] = Counter() if counts is None else counts

    async def client(conn: Connection) -> None:
        for _ in todo:
            answer = await conn.call(
                "tools/call", {"name": "nap", "arguments": {"ms": tool_ms}}, "nap"
            )
            sent_count["tools/call"] += 1
            if answer.get("result", {}).get("isError", True):
                raise RuntimeError(f"the plain nap answered {answer}")

    await each_connected(port, in_flight, client)


def per_task(counts: Counter[str], tasks: int) -> dict[str, float]:
    """Requests answered per completed task, by method."""
    return {method: n / tasks for method, n in sorted(counts.items())}


def cpu_per_task(
    targets_: Sequence[Target],
    pids: dict[str, int],
    *,
    tasks: int,
    in_flight: int,
    tool_ms: int,
    poll_ms: int,
) -> dict[str, dict[str, Any]]:
    """Section 2: per server with tasks, CPU ms per completed task (server + database),
    requests per task and create p50/p99; for the SDK, CPU ms per plain call of the tool."""
    results: dict[str, dict[str, Any]] = {}
    for target in targets_:
        if target.kind == "bare" or target.capacity_only:
            continue
        counts: Counter[str] = Counter()
        usage = target.usage(pids[target.name])
        if target.kind == "sdk":
            results[target.name] = plain_calls(target, usage, tasks, in_flight, tool_ms)
            continue
        asyncio.run(drive(target.port, in_flight, in_flight, 0, poll_ms))  # warm-up
        usage.start()
        start = time.perf_counter()
        created = asyncio.run(drive(target.port, tasks, in_flight, tool_ms, poll_ms, counts=counts))
        wall = time.perf_counter() - start
        usage.stop()
        ms = [(answered - sent) * 1000 for sent, answered in sorted(created)]
        # The first wave is the in_flight creates every client sends at the same instant
        # when the run starts: the last of them waits for the server to handle all the
        # others, so it holds the p99. Reported apart, beside the goal's figures of all.
        first, later = ms[:in_flight], ms[in_flight:]
        results[target.name] = {
            "served": target.label,
            **cpu_figures(usage, tasks),
            "requests_per_task": per_task(counts, tasks),
            "create_p50_ms": median(ms),
            "create_p99_ms": percentile(ms, 0.99),
            "first_wave_create_median_ms": median(first),
            "first_wave_create_max_ms": max(first),
            "later_create_p50_ms": median(later) if later else None,
            "later_create_p99_ms": percentile(later, 0.99) if later else None,
            "wall_s": wall,
        }
        database = usage.database_s
        print(
            f"  {target.name:<24}{usage.total_s * 1000 / tasks:>8.2f} ms CPU/task"
            f" (database {'?' if database is None else f'{database * 1000 / tasks:.2f}'})"
            f"  {requests_text(results[target.name]['requests_per_task'])}"
            f"  create p50 {median(ms):.1f} ms, p99 {percentile(ms, 0.99):.1f} ms"
            f" (first wave median {median(first):.1f}, max {max(first):.1f} ms)"
            f"  ({target.label})",
            flush=True,
        )
    return results


def plain_calls(
    target: Target, usage: Usage, calls: int, in_flight: int, tool_ms: int
) -> dict[str, Any]:
    """The workload's tool as ``calls`` plain ``tools/call``s on the SDK's server: CPU ms per
    call (``cpu_ms_per_task``: the floor's call) and the requests it answered per call."""
    counts: Counter[str] = Counter()
    asyncio.run(drive_plain(target.port, in_flight, in_flight, 0))  # warm-up
    usage.start()
    asyncio.run(drive_plain(target.port, calls, in_flight, tool_ms, counts=counts))
    usage.stop()
    print(
        f"  {target.name:<24}{usage.total_s * 1000 / calls:>8.2f} ms CPU/call (plain)"
        f"  ({target.label})",
        flush=True,
    )
    return {
        "served": target.label,
        **cpu_figures(usage, calls),
        "requests_per_task": per_task(counts, calls),
    }


def cpu_figures(usage: Usage, tasks: int) -> dict[str, float | None]:
    """The CPU ms per task of a run: the server's, its database's (``None``: not
    readable) and their sum (``cpu_ms_per_task``, the figure the goals compare)."""
    database = usage.database_s
    return {
        "cpu_ms_per_task": usage.total_s * 1000 / tasks,
        "server_cpu_ms_per_task": usage.server_s * 1000 / tasks,
        "database_cpu_ms_per_task": None if database is None else database * 1000 / tasks,
    }


def requests_text(requests: dict[str, float]) -> str:
    """``1 tools/call + 4.1 tasks/get``: requests per task, by method (``tools/call``
    first, then by name)."""
    ordered = sorted(requests.items(), key=lambda item: (item[0] != "tools/call", item[0]))
    return " + ".join(f"{n:.3g} {method}" for method, n in ordered)


#: Section 2b's row of our memory server that creates its tasks for workers and runs none.
CREATE_ONLY = "memory create only"


def tools_call_cpu(
    targets_: Sequence[Target],
    pids: dict[str, int],
    *,
    seconds: float,
    connections: int,
    rounds: int,
) -> dict[str, dict[str, Any]]:
    """A task-creating ``tools/call`` of ``nap`` (0 ms) on memory beside the SDK's plain
    ``tools/call`` of the same tool, under ``wrk`` (``wrk_rounds``): the server's CPU per
    request. On ``memory`` that is the whole task without its polls (the create, the
    task's run and its completion, as the plain call runs the tool); on
    :data:`CREATE_ONLY` (the same server with ``run_tasks=False``, started here: its tasks
    are created for workers and none runs) the create request alone."""
    wrk = ensure_wrk()
    chosen = [t for t in targets_ if t.name in ("memory", SDK)]
    if len(chosen) < 2:
        return {}
    params = {"name": "nap", "arguments": {"ms": 0}}
    port = free_port()
    argv = [sys.executable, "-m", "bench.servers", "ours", "--store", "memory://"]
    create_only = Target(CREATE_ONLY, [*argv, "--port", str(port), "--create-only"], port, "tasks")
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as servers:
        pids = {**pids, CREATE_ONLY: started(servers, create_only, Path(tmp))}
        runs = []
        for target in [*chosen, create_only]:
            check_answer(target, "tools/call", params, "nap")
            script = wrk_script("tools/call", params, "nap", Path(tmp) / target.name)
            run_wrk(wrk, target.port, script, 1, connections)  # warm-up
            runs.append((target, pids[target.name], script))
        return wrk_rounds(wrk, runs, seconds=seconds, connections=connections, rounds=rounds)
