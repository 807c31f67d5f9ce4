"""A Redis server of the tests' own: S-DURABLE through its restart, and its unix socket.

With ``appendonly yes`` and ``appendfsync always``, 1 000 tasks in all five statuses are
there, unchanged, after the server stops and starts, and claims stay valid (closing and
reopening a handle is the contract suite's S-DURABLE).

The machine's shared server keeps nothing on disk (and listens on TCP only), so this
module runs a ``redis-server`` of its own (the binary on PATH) in a temporary directory,
on a free port and a unix socket.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import redis

from mcp_tasks import (
    NewTask,
    StoreOptions,
    StoreUnavailable,
    TaskNotFound,
    drop_namespace,
    namespaced_url,
    new_task_id,
    store_from_url,
)
from mcp_tasks_contract.population import assert_survived, populate, snapshot
from mcp_tasks_contract.servers import unavailable
from mcp_tasks_redis import RedisTaskStore

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.anyio


class OwnRedis:
    """A redis-server with an append-only file, owned by this module."""

    def __init__(self, binary: str, directory: Path) -> None:
        self._binary, self._directory = binary, directory
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.socket = directory / "redis.sock"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        options = {"bind": "127.0.0.1", "port": str(self.port), "dir": str(self._directory)}
        options |= {"appendonly": "yes", "appendfsync": "always", "save": ""}
        options |= {"unixsocket": str(self.socket), "unixsocketperm": "700"}
        arguments = [part for name, value in options.items() for part in (f"--{name}", value)]
        self._process = subprocess.Popen(
            [self._binary, *arguments],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    if client.ping():
                        return
                except redis.ConnectionError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        finally:
            client.close()

    def stop(self) -> None:
        """A clean shutdown (the append-only file is complete), then wait for the process."""
        if self._process is None:
            return
        client = redis.Redis.from_url(self.url)
        try:
            client.shutdown(nosave=True)
        except redis.ConnectionError:
            pass  # it closes the connection as it exits
        finally:
            client.close()
        self._process.wait(timeout=20)
        self._process = None

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture(scope="module")
def own_server() -> Iterator[OwnRedis]:
    """A Redis server this module may stop and start (never the shared one)."""
    binary = shutil.which("redis-server")
    if binary is None:
        unavailable("own redis-server", "put a redis-server binary on PATH")
    with tempfile.TemporaryDirectory(prefix="mcp-tasks-redis-restart-") as directory:
        server = OwnRedis(binary, Path(directory))
        server.start()
        try:
            yield server
        finally:
            server.stop()


async def test_tasks_survive_a_server_restart(own_server: OwnRedis) -> None:
    """After the server stops and starts, a new handle and the old one see every write unchanged."""
    store = RedisTaskStore(own_server.url, StoreOptions(max_rows=None), prefix="durable")
    try:
        ids, leases = await populate(store)
        before = await snapshot(store, ids)
        own_server.restart()
        # The old handle's pooled connections died with the server: at most one call
        # reports StoreUnavailable (driver error kept as cause), then it serves again.
        failures: list[StoreUnavailable] = []
        for _ in range(2):
            try:
                assert await snapshot(store, ids) == before
                break
            except StoreUnavailable as exc:
                failures.append(exc)
        assert len(failures) <= 1
        assert all(f.__cause__ is not None for f in failures)
        fresh = RedisTaskStore(own_server.url, prefix="durable")
        try:
            await assert_survived(fresh, before, leases)
        finally:
            await fresh.close()
    finally:
        await store.close()


async def test_a_unix_socket_url(own_server: OwnRedis) -> None:
    """redis+unix:///path.sock?db=N opens the store over the server's unix socket; the
    prefix, namespaced_url and drop_namespace work as over TCP; a ?password= is masked."""
    url = namespaced_url(f"redis+unix://{own_server.socket}?db=1", "over_socket")
    store = store_from_url(url)
    assert isinstance(store, RedisTaskStore)
    assert store.url == url
    try:
        task = await store.create(NewTask(new_task_id()))
        assert await store.get(task.task_id, None) == task
        await drop_namespace(url)
        with pytest.raises(TaskNotFound):
            await store.get(task.task_id, None)
    finally:
        await store.close()
    secret = store_from_url(f"redis+unix://{own_server.socket}?db=1&password=hunter2")
    assert "hunter2" not in repr(secret)
    assert "password=***" in repr(secret)
