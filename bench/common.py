"""What every section shares: the backends of this run, server processes, a lean HTTP client,
and the CPU time (of a server and of the database processes serving it) and resident size
from ``/proc``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from mcp_tasks import (
    ANY_OWNER,
    TaskNotFound,
    UnknownStoreScheme,
    drop_namespace,
    namespaced_url,
    store_from_url,
)
from mcp_tasks.stores.opening import backend_for
from mcp_tasks_mongodb.provision import embedded_mongodb, mongodb_store_url
from mcp_tasks_postgres.provision import embedded_postgres

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

ROOT = Path(__file__).resolve().parent.parent
PROTOCOL = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

#: Environment variables that name the servers of the durable backends (the test suite's).
SERVER_ENV = {
    "postgres": "MCP_TASKS_TEST_POSTGRES_URL",
    "redis": "MCP_TASKS_TEST_REDIS_URL",
    "mongodb": "MCP_TASKS_TEST_MONGODB_URL",
}


#: Upper bounds on the run's sizes (bench/run.py settings) on the embedded SecantusDB
#: server. It is a MongoDB wire-protocol server written in Python whose index range scans
#: and counts visit every entry they cover: a claim (the ready lane) and a create under a
#: row cap (the count) take time in proportion to the collection, so the run's sizes would
#: take hours there (docs/performance.md). A real mongod (MCP_TASKS_TEST_MONGODB_URL) gets
#: the run's sizes.
SECANTUS_SIZES = {"store_ops": 300, "scale_large": 20_000, "cap": 1_000}


@dataclass
class Backend:
    """One store of the run: its name and a URL of its own namespace (dropped at the end)."""

    name: str
    url: str
    server: str  #: where it runs, for the report (never a password)
    base: str | None = None  #: the server's URL, before any namespace (server backends)
    #: upper bounds on the run's settings for this backend (a slow server's smaller sizes)
    at_most: dict[str, int] = field(default_factory=dict)

    def sized(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """The run's ``settings`` with this backend's upper bounds applied."""
        return {**settings, **{k: min(settings[k], v) for k, v in self.at_most.items()}}


@dataclass
class Backends:
    """The backends this machine has, and why each missing one is missing."""

    available: list[Backend] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> Backend | None:
        return next((b for b in self.available if b.name == name), None)


def _installed(scheme: str) -> str | None:
    """Why no store serves ``scheme``, or ``None`` when one is installed."""
    try:
        backend_for(f"{scheme}://localhost/x")
    except UnknownStoreScheme:
        return f"no {scheme}:// store is installed"
    return None


def find_backends(stack: ExitStack, directory: Path, only: Sequence[str] | None) -> Backends:
    """Every backend this run can measure: memory and SQLite always (when installed), the
    server backends when their server answers (from the test suite's environment variables;
    else Postgres from an embedded server and MongoDB from the embedded SecantusDB server,
    each started for the run and stopped when ``stack`` ends). Each gets a fresh namespace,
    dropped on exit."""
    found = Backends()
    wanted = list(only or ["memory", "sqlite", "postgres", "redis", "mongodb"])
    for name in wanted:
        scheme = "postgresql" if name == "postgres" else name
        why = _installed(scheme)
        if why is not None:
            found.missing[name] = f"not available: {why}"
            continue
        if name == "memory":
            found.available.append(Backend(name, "memory://", "this process"))
            continue
        if name == "sqlite":
            path = directory / "bench.db"
            found.available.append(Backend(name, f"sqlite:///{path}", "a file in a temp dir"))
            continue
        url = os.environ.get(SERVER_ENV[name])
        where = SERVER_ENV[name]
        if not url and name == "postgres":
            server = stack.enter_context(embedded_postgres())
            if server is not None:
                url, where = server.url, "embedded server"
        at_most: dict[str, int] = {}
        if not url and name == "mongodb":
            url, where = stack.enter_context(embedded_mongodb()), "embedded SecantusDB server"
            at_most = SECANTUS_SIZES
        if not url and name == "redis":
            url, where = "redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0 (default)"
        if not url:
            found.missing[name] = f"not available: set {SERVER_ENV[name]}"
            continue
        # The embedded SecantusDB server is slow enough that a burst of creates outwaits the
        # product's 5 s bound: its stores get the tests' longer one (the raw URL stays `base`).
        spaced = namespaced_url(mongodb_store_url(url), "mcpt_bench_" + secrets.token_hex(4))
        problem = asyncio.run(_answers(spaced))
        if problem is not None:
            found.missing[name] = f"not available: {where} does not answer ({problem})"
            continue
        stack.callback(drop_now, spaced)
        found.available.append(Backend(name, spaced, where, url, at_most))
    return found


def namespace_factory(stack: ExitStack, directory: Path, backend: Backend) -> Callable[[], str]:
    """A maker of fresh, empty store URLs on ``backend`` (each dropped when ``stack`` ends)."""
    counter = iter(range(1_000_000))

    def fresh() -> str:
        if backend.name == "memory":
            return "memory://"
        if backend.name == "sqlite":
            return f"sqlite:///{directory / f'fresh-{next(counter)}.db'}"
        assert backend.base is not None
        url = namespaced_url(mongodb_store_url(backend.base), "mcpt_bench_" + secrets.token_hex(4))
        stack.callback(drop_now, url)
        return url

    return fresh


async def _answers(url: str) -> str | None:
    """Why the store at ``url`` cannot be used, or ``None`` (one get of a missing task)."""
    store = store_from_url(url)
    try:
        await store.get("probe-" + secrets.token_hex(8), ANY_OWNER)
    except TaskNotFound:
        return None
    except Exception as error:  # any failure: the backend is not usable here
        return f"{type(error).__name__}: {error}"
    finally:
        with contextlib.suppress(Exception):
            await store.close()
    return None


def drop_now(url: str) -> None:
    """Drop the namespace at ``url`` (a clean-up: a failure is ignored)."""
    asyncio.run(_drop(url))


async def _drop(url: str) -> None:
    with contextlib.suppress(Exception):
        await drop_namespace(url)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (``/proc/<pid>/stat``)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def cpu_of(pids: Iterable[int]) -> dict[int, float]:
    """The CPU time so far of each of ``pids`` still running."""
    found = {}
    for pid in pids:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            found[pid] = cpu_seconds(pid)
    return found


LOOPBACK = ("127.0.0.1", "localhost", "::1", "")


def is_local(url: str) -> bool:
    """Whether the server of ``url`` runs on this machine (its processes can be read)."""
    return (urlsplit(url).hostname or "") in LOOPBACK


def connected_ports(pid: int, remote_port: int) -> set[int]:
    """The local ports of process ``pid``'s TCP connections to ``remote_port``: its sockets
    (``/proc/<pid>/fd``) looked up in the kernel's TCP tables by inode."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote, inode = fields[1], fields[2], fields[9]
            if inode in inodes and int(remote.rpartition(":")[2], 16) == remote_port:
                ports.add(int(local.rpartition(":")[2], 16))
    return ports


def unix_peers(pid: int, name: str) -> set[int] | None:
    """The processes called ``name`` at the other end of process ``pid``'s Unix-socket
    connections (``ss -xpn`` lists each socket's inode, its peer's and its process), or
    ``None`` without ``ss``."""
    ss = shutil.which("ss")
    if ss is None:
        return None
    listing = subprocess.run([ss, "-xpn"], capture_output=True, text=True, check=True).stdout
    ours, owners = set(), {}
    for line in listing.splitlines()[1:]:
        fields = line.split()
        owner = re.search(r'\(\("([^"]*)",pid=(\d+),', line)
        if len(fields) < 8 or owner is None:
            continue
        if int(owner.group(2)) == pid:
            ours.add(fields[7])  # the peer's inode
        elif owner.group(1) == name:
            owners[fields[5]] = int(owner.group(2))
    return {owners[inode] for inode in ours if inode in owners}


def listening_pid(port: int) -> int | None:
    """The process listening on TCP ``port`` on this machine, if it can be found."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rpartition(":")[2], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in inodes:
                        return int(proc.name)
    return None


def database_pids(kind: str, url: str, server_pid: int) -> list[int] | None:
    """The database processes serving the server ``server_pid`` on the store ``kind`` at
    ``url`` (their CPU is the task's too): none for memory and SQLite (in the server's own
    process); the Postgres backends of the server's connections (``pg_stat_activity`` by
    client port); the Redis server (``INFO server``'s ``process_id``: its CPU for every
    client, so only a machine running nothing else gives a clean figure); the MongoDB
    server listening on the URL's port (the embedded SecantusDB server is our child).
    ``None`` when they cannot be read: a server on another machine. Postgres over a Unix
    socket (the embedded server's URL): the ``postgres`` processes at the other end of the
    server's Unix-socket connections."""
    if kind in ("memory", "sqlite"):
        return []
    if not is_local(url):
        return None
    port = urlsplit(url).port
    if kind == "postgres":
        ports = connected_ports(server_pid, port or 5432)
        backends = set(asyncio.run(_postgres_backends(url, ports))) if ports else set()
        over_unix = unix_peers(server_pid, "postgres")
        return None if over_unix is None else sorted(backends | over_unix)
    if kind == "redis":
        pid = asyncio.run(_redis_pid(url))
        return [pid] if Path(f"/proc/{pid}/comm").exists() else None
    if kind == "mongodb":
        found = listening_pid(port or 27017)
        return None if found is None else [found]
    return None


async def _postgres_backends(url: str, ports: set[int]) -> list[int]:
    import asyncpg  # noqa: PLC0415 (the Postgres store's driver, imported when used)

    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "select pid from pg_stat_activity where client_port = any($1::int[])", list(ports)
        )
    finally:
        await conn.close()
    return [int(row["pid"]) for row in rows]


async def _redis_pid(url: str) -> int:
    from redis.asyncio import Redis  # noqa: PLC0415 (the Redis store's driver)

    client = Redis.from_url(url)
    try:
        info = await client.info("server")
    finally:
        await client.aclose()
    return int(info["process_id"])


@dataclass
class Usage:
    """CPU time used between :meth:`start` and :meth:`stop` by a server process and by the
    database processes serving it (``database_pids``, found again at the stop: a connection
    opened meanwhile counts from its start; one closed meanwhile is lost)."""

    server_pid: int
    kind: str = "memory"  #: the store kind (``database_pids``)
    url: str = ""
    server_s: float = 0.0
    database_s: float | None = 0.0  #: ``None``: the database's processes cannot be read
    _before: dict[int, float] = field(default_factory=dict)

    def _database(self) -> list[int] | None:
        return database_pids(self.kind, self.url, self.server_pid)

    def start(self) -> None:
        self._before = cpu_of([self.server_pid, *(self._database() or [])])

    def stop(self) -> Usage:
        database = self._database()
        after = cpu_of([self.server_pid, *(database or [])])
        self.server_s = after[self.server_pid] - self._before[self.server_pid]
        self.database_s = (
            None
            if database is None
            else sum(after[p] - self._before.get(p, 0.0) for p in database if p in after)
        )
        return self

    @property
    def total_s(self) -> float:
        return self.server_s + (self.database_s or 0.0)


def resident_bytes(pid: int) -> int:
    """Resident set size of process ``pid`` (``VmRSS``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


@contextlib.contextmanager
def server_process(
    argv: Sequence[str], port: int, *, env: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run a server (``argv``, listening on ``port``) until the block ends; waits until it
    accepts connections. Its output goes to a log under ``.cache/bench``."""
    logs = ROOT / ".cache" / "bench" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / f"server-{port}.log").open("wb") as log:
        process = subprocess.Popen(
            list(argv),
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )
        try:
            deadline = time.monotonic() + 90
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"{argv[1:]} exited ({process.returncode}); see {log.name}")
                with (
                    contextlib.suppress(OSError),
                    socket.create_connection(("127.0.0.1", port), 0.2),
                ):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{argv[1:]} did not listen on {port}")
                time.sleep(0.1)
            yield process
        finally:
            stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate ``process``; killed if it has not ended 10 s later."""
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


#: ``mcp-tasks``, as the bench's Python installed it.
CLI = str(Path(sys.executable).parent / "mcp-tasks")


def serving(stack: ExitStack, app: str, store_url: str, count: int) -> tuple[list[int], list[int]]:
    """``count`` processes of ``mcp-tasks serve APP --store STORE_URL``, each on a free
    port, until ``stack`` closes: their ports and pids."""
    ports, pids = [], []
    for _ in range(count):
        port = free_port()
        argv = [
            CLI,
            "serve",
            app,
            "--store",
            store_url,
            "--port",
            str(port),
            "--log-level",
            "warning",
        ]
        pids.append(stack.enter_context(server_process(argv, port)).pid)
        ports.append(port)
    return ports, pids


def our_server(backend: Backend, port: int, max_rows: int | None = None) -> list[str]:
    argv = [sys.executable, "-m", "bench.servers", "ours", "--store", backend.url]
    return [*argv, "--port", str(port), "--max-rows", str(max_rows or 0)]


def request_headers(method: str, name: str | None) -> dict[str, str]:
    """The headers of a 2026-07-28 request (as ``mcp_tasks.testing.RawClient`` sends)."""
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": PROTOCOL,
        "mcp-method": method,
    }
    if name is not None:
        headers["mcp-name"] = name
    return headers


def request_body(method: str, params: Mapping[str, Any], request_id: int = 1) -> bytes:
    """A JSON-RPC request whose ``_meta`` declares the protocol and the tasks extension."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
    }
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**params, "_meta": meta},
    }
    return json.dumps(body, separators=(",", ":")).encode()


class Connection:
    """One kept-alive HTTP/1.1 connection speaking just enough to POST JSON-RPC: a Python
    client with little overhead of its own (the servers answer with a Content-Length)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def connect(self) -> None:
        """Open the connection now (else the first call opens it)."""
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    async def call(self, method: str, params: Mapping[str, Any], name: str | None = None) -> Any:
        """POST one request to /mcp; the decoded JSON-RPC response."""
        await self.connect()
        assert self.reader is not None
        assert self.writer is not None
        body = request_body(method, params)
        head = "".join(f"{k}: {v}\r\n" for k, v in request_headers(method, name).items())
        host = f"host: 127.0.0.1:{self.port}\r\n"  # with the port: the SDK checks it
        start = f"POST /mcp HTTP/1.1\r\n{host}{head}content-length: {len(body)}\r\n\r\n"
        self.writer.write(start.encode() + body)
        status = await self.reader.readline()
        length = None
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            key, _, value = line.decode().partition(":")
            if key.lower() == "content-length":
                length = int(value)
        if not status.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"{method} answered {status!r}")
        if length is None:
            raise RuntimeError(f"no content-length in the answer to {method} ({status!r})")
        return json.loads(await self.reader.readexactly(length))

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def median(values: Sequence[float]) -> float:
    return statistics.median(values)
