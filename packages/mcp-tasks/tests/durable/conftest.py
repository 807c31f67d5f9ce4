"""Real processes on one store: ``mcp-tasks serve`` / ``mcp-tasks worker`` of ``crash_app``
(or the conformance fixture server, or ``soak_app``), started, killed and stopped by the
crash tests and the soak."""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.abc
import pytest

from mcp_tasks import drop_namespace, namespaced_url

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence


HERE = Path(__file__).resolve().parent
READY = re.compile(r"mcp-tasks: (serving on (?P<url>http://\S+)|worker .* running)")
#: Starting a process imports the SDK: slow on a loaded 2-core machine, never timed.
START_TIMEOUT_S = 120


@dataclass
class Process:
    """One real server or worker process and what it printed."""

    process: anyio.abc.Process
    url: str | None = None
    output: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.process.send_signal(signal.SIGTERM)

    async def wait(self) -> int:
        return await self.process.wait()


class Processes:
    """Starts processes of one store and kills whatever is left at the end."""

    def __init__(self, store_url: str, log: Path, stack: AsyncExitStack, tg: anyio.abc.TaskGroup):
        self.store_url = store_url
        self.log = log
        self._stack = stack
        self._tg = tg
        self.started: list[Process] = []
        #: Where the servers run: a command prefix (``ip netns exec NAME``) and the
        #: address they bind (remote_host.py); this machine's loopback by default.
        self.prefix: list[str] = []
        self.host = "127.0.0.1"
        #: An app served instead of another (``crash_app:anywhere`` for ``crash_app:mcp``).
        self.apps: dict[str, str] = {}

    def env(self, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            "CRASH_STORE_URL": self.store_url,
            "CRASH_LOG": str(self.log),
            "PYTHONUNBUFFERED": "1",
            **extra,
        }

    async def start(
        self,
        command: Sequence[str],
        *,
        stdout: Path | None = None,
        **env: str,
    ) -> Process:
        """Start ``command`` (in this folder) and wait until it says it is ready (its
        ``mcp-tasks: serving on URL`` or ``worker … running`` line); its output goes to
        ``stdout`` (a file), else nowhere."""
        with ExitStack() as files:  # the child keeps its own handle of the file
            out = subprocess.DEVNULL if stdout is None else files.enter_context(stdout.open("wb"))
            raw = await anyio.open_process(
                [*self.prefix, *command],
                cwd=HERE,
                env=self.env(**env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        process = Process(raw)
        self.started.append(process)
        ready = anyio.Event()
        # Each process's stderr (its log) is also kept beside the app's log, to read after
        # a failure: pytest shows where tmp_path is.
        kept = self.log.parent / f"process-{len(self.started)}-{raw.pid}.stderr"

        async def read() -> None:
            assert raw.stderr is not None
            buffer = b""
            async for chunk in raw.stderr:
                with kept.open("ab") as file:
                    file.write(chunk)
                buffer += chunk
                *lines, rest = buffer.split(b"\n")
                buffer = rest
                for line in lines:
                    text = line.decode(errors="replace")
                    process.output.append(text)
                    found = READY.search(text)
                    if found:
                        process.url = found.group("url")
                        ready.set()
            ready.set()  # ended before it was ready: the wait below says so

        self._tg.start_soon(read)
        with anyio.fail_after(START_TIMEOUT_S):
            await ready.wait()
        if raw.returncode is not None or not any(READY.search(t) for t in process.output):
            raise AssertionError("the process did not start:\n" + "\n".join(process.output))
        return process

    async def serve(self, app: str = "crash_app:mcp", **env: str) -> Process:
        return await self.start(
            [
                *(sys.executable, "-m", "mcp_tasks.cli", "serve", self.apps.get(app, app)),
                *("--port", "0", "--host", self.host),
            ],
            **env,
        )

    async def worker(
        self, app: str = "crash_app:mcp", *, stdout: Path | None = None, **env: str
    ) -> Process:
        return await self.start(
            [sys.executable, "-m", "mcp_tasks.cli", "worker", app], stdout=stdout, **env
        )

    def lines(self, kind: str) -> list[tuple[int, str, str]]:
        """``(pid, task id, what)`` of each ``kind`` line the app logged, in order."""
        if not self.log.exists():
            return []
        found = []
        for line in self.log.read_text(encoding="utf-8").splitlines():
            got_kind, pid, task_id, what = line.split(" ", 3)
            if got_kind == kind:
                found.append((int(pid), task_id, what))
        return found

    def stop_all(self) -> None:
        for process in self.started:
            if process.process.returncode is None:
                process.kill()


#: A store URL the crash tests run on instead of this repository's backends, in a fresh
#: namespace of it per test: how a store of another distribution is proven (the
#: ``mysql-example`` nox session sets it to its MariaDB).
OTHER_STORE_ENV = "MCP_TASKS_CRASH_STORE_URL"
OTHER_STORE = os.environ.get(OTHER_STORE_ENV)


@pytest.fixture(
    params=[OTHER_STORE.split(":", 1)[0]]
    if OTHER_STORE
    else ["sqlite", "postgres", "redis", "mongodb"]
)
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A durable store two processes share: a SQLite file, a fresh Postgres schema, a fresh
    Redis key prefix, a fresh MongoDB collection prefix (or a fresh namespace of
    ``OTHER_STORE``)."""
    async with durable_url(request, tmp_path) as url:
        yield url


@asynccontextmanager
async def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """The store ``request.param`` names (or ``OTHER_STORE``), in a namespace of its own,
    dropped at the end."""
    if request.param == "sqlite" and not OTHER_STORE:
        yield f"sqlite:///{tmp_path / 'tasks.db'}"
        return
    # What these tests prove is not the store's bound: the URL its backend opens tests'
    # stores on (a longer bound on the slow embedded MongoDB server).
    server = OTHER_STORE or request.getfixturevalue("store_servers").store_url(request.param)
    url = namespaced_url(server, "crash_" + secrets.token_hex(6))
    try:
        yield url
    finally:
        await drop_namespace(url)


@asynccontextmanager
async def processes_of(store_url: str, log: Path) -> AsyncIterator[Processes]:
    """Processes on ``store_url``, every one killed (and waited for) at the end."""
    async with AsyncExitStack() as stack, anyio.create_task_group() as tg:
        started = Processes(store_url, log, stack, tg)
        try:
            yield started
        finally:
            started.stop_all()
            with anyio.move_on_after(30):
                for process in started.started:
                    await process.wait()
            tg.cancel_scope.cancel()


@pytest.fixture
async def processes(store_url: str, tmp_path: Path) -> AsyncIterator[Processes]:
    async with processes_of(store_url, tmp_path / "crash.log") as started:
        yield started


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def soak_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """The soak's stores: the server process's own memory, a SQLite file, a fresh Postgres
    schema."""
    if request.param == "memory":
        yield "memory://"
        return
    async with durable_url(request, tmp_path) as url:
        yield url


@pytest.fixture
async def soak_processes(soak_store_url: str, tmp_path: Path) -> AsyncIterator[Processes]:
    async with processes_of(soak_store_url, tmp_path / "crash.log") as started:
        yield started


@pytest.fixture(params=["memory", "sqlite", "postgres", "redis", "mongodb"])
async def every_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """Every store a process can serve on: the process's own memory, then the durable ones
    (as :func:`store_url` gives them)."""
    if request.param == "memory":
        yield "memory://"
        return
    async with durable_url(request, tmp_path) as url:
        yield url


@pytest.fixture
async def every_store_processes(every_store_url: str, tmp_path: Path) -> AsyncIterator[Processes]:
    async with processes_of(every_store_url, tmp_path / "crash.log") as started:
        yield started
