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

And a renew whose resend comes after other calls wrote to the same task: the task keeps
the nonces of its last few writes, not only of the last one.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from resend_scenarios import (
    LEASE_MS,
    SCENARIOS,
    DroppingProxy,
    run_dropped,
    run_twice,
    through,
)

from mcp_tasks import ANY_OWNER, NewTask, Progress, StaleLease, StoreOptions, WorkSpec, new_task_id
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


@pytest.mark.parametrize("between", ["progress", "cancel"])
async def test_a_renew_resent_after_other_writes_answers_its_first_run(
    open_store: OpenStore, between: str
) -> None:
    """A resend comes after a reconnect and a backoff, and other calls may write to the
    task meanwhile (the worker's progress reports, a client's cancel): the renew's resend
    still finds its nonce among the task's last writes, answers the end its first run set
    and extends nothing, also when the task was cancelled in between (no StaleLease)."""
    store, other = await open_store(), await open_store()
    task = await other.create(NewTask(new_task_id(), work=WorkSpec("job")))
    claimed = await other.claim("w1", lease_ms=LEASE_MS, task_id=task.task_id)
    assert claimed is not None
    lease = claimed.lease
    store._client()
    script = store._scripts["renew"]
    replies: list[bytes] = []

    async def resent_after_other_writes(keys: list[str], args: list[str | int]) -> bytes:
        replies.append(await script(keys=keys, args=args))
        if between == "progress":
            for frame in range(3):
                await other.put_status(task.task_id, Progress(f"frame {frame}"), lease=lease)
        else:
            await other.cancel(task.task_id, None)
        await asyncio.sleep(0.01)  # the server's clock moves on: a second renew would show
        replies.append(await script(keys=keys, args=args))
        return replies[-1]

    store._scripts["renew"] = resent_after_other_writes  # type: ignore[assignment]
    try:
        renewed = await store.renew(lease, lease_ms=2 * LEASE_MS)
    except StaleLease:
        pytest.fail("the resend was not recognised: it met the cancelled task as a new renew")
    assert replies[1] == replies[0], "the resend renewed again instead of answering"
    assert renewed.expires_at == int(replies[0])
    record = await other.get(task.task_id, ANY_OWNER)
    assert record.claim is not None
    assert record.claim.expires_at == renewed.expires_at


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
