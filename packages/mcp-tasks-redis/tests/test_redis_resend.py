"""A script redis-py sends again is recognised: it answers what its first run answered and
writes nothing more.

redis-py resends a command after a connection error, also when the server had already run
it and only the reply was lost. Each write script carries a nonce of its own call
(identical in every resend of that call), so a resend finds its own write and answers it.

Two ways to resend, each against every write of the store:

* ``twice``: the store's script object is wrapped so that each call runs the script two
  times with the same keys and arguments (what a resend sends); both replies must be equal
  and the store's answer and the task must be as after one run.
* ``dropped reply``: the store talks to Redis through a small TCP proxy that forwards the
  script to the server and then closes the client's connection instead of forwarding the
  reply. redis-py reconnects and resends by itself; the proxy sees the script twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from resend_scenarios import SCENARIOS, DroppingProxy, run_dropped, run_twice

from mcp_tasks import StoreOptions
from mcp_tasks_redis import RedisTaskStore
from mcp_tasks_redis.store import RESENDS

if TYPE_CHECKING:
    from conftest import OpenStore

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("name", SCENARIOS)
async def test_a_script_run_twice_answers_and_writes_as_once(
    open_store: OpenStore, name: str
) -> None:
    """The same call's script, run a second time, answers what the first run answered (a
    hash compared field by field) and writes nothing more."""
    await run_twice(await open_store(), SCENARIOS[name])


@pytest.fixture
async def proxy(redis_url: str) -> Any:
    parts = urlsplit(redis_url)
    assert parts.hostname is not None
    proxy = DroppingProxy(parts.hostname, parts.port or 6379)
    await proxy.start()
    yield proxy
    await proxy.close()


def through(url: str, proxy: DroppingProxy) -> str:
    parts = urlsplit(url)
    userinfo, _, _ = parts.netloc.rpartition("@")
    address = f"127.0.0.1:{proxy.listen_port}"
    return parts._replace(netloc=f"{userinfo}@{address}" if userinfo else address).geturl()


@pytest.mark.parametrize("name", SCENARIOS)
async def test_a_lost_reply_is_resent_and_recognised(
    open_store: OpenStore, redis_url: str, namespace: str, proxy: DroppingProxy, name: str
) -> None:
    """The connection drops after the server ran the script, before its reply arrived:
    redis-py resends it on a new connection and the store answers as if nothing had
    happened, the task written exactly once."""
    direct = await open_store()
    store = RedisTaskStore(through(redis_url, proxy), StoreOptions(), prefix=namespace)
    try:
        await run_dropped(direct, store, [proxy], SCENARIOS[name])
    finally:
        await store.close()


async def test_both_clients_resend_alike() -> None:
    """The single-server and the cluster client resend a command the same number of times
    after a connection error (redis-py's from_url alone would make the first resend
    nothing)."""
    single = RedisTaskStore("redis://127.0.0.1:1/0")
    cluster = RedisTaskStore("redis://127.0.0.1:1/0", cluster=True)
    try:
        one, many = single._client(), cluster._client()
        assert isinstance(one, Redis)
        assert isinstance(many, RedisCluster)
        connection = one.connection_pool.make_connection()
        assert connection.retry.get_retries() == many.retry.get_retries() == RESENDS > 0
    finally:
        await single.close()
        await cluster.close()
