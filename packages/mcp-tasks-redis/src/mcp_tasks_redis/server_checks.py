"""`mcp-tasks doctor` on a Redis store: the server, its persistence, eviction, the namespace's
keys and the clock, as ``(check, level, detail)`` rows (level ``ok``, ``warn`` or ``fail``).

Doctor is an operator's command, never a request path: it may SCAN the namespace's hash
tag and read the server's settings, which no Store operation does.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError, ResponseError

from mcp_tasks.stores.doctor_rows import clock_skew_row
from mcp_tasks.stores.kit import DriverErrors

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from mcp_tasks.stores.doctor_rows import DiagnosisRow as Row

#: What a crash can lose with the append-only file on, per ``appendfsync``.
APPENDFSYNC_LOSS = {
    "always": "fsync after every write: a crash, even of the machine, loses no acknowledged write",
    "everysec": (
        "fsync once a second: a crash can lose about the last second (2 s at worst) of "
        "acknowledged writes"
    ),
    "no": (
        "the OS flushes when it likes: a crash of Redis alone loses nothing, a crash of the "
        "machine every write the OS had not flushed yet (about 30 s on Linux)"
    ),
}

#: The one eviction policy that never deletes the store's keys: a task's hash carries the
#: janitor's expiry (``PEXPIREAT``), so ``volatile-*`` policies may evict it too.
SAFE_POLICIES = frozenset({"noeviction"})


#: A server that does not answer is StoreUnavailable (doctor reports the cause); one that
#: answers with a refusal (ResponseError) is not: each check decides what a refusal means.
_UNAVAILABLE = DriverErrors(RedisError, OSError, TimeoutError, excluding=(ResponseError,))


async def diagnose(client: Redis, prefix: str) -> list[Row]:
    """Every Redis check, in the order doctor prints them.

    Raises:
        StoreUnavailable: the server did not answer.
    """
    with _UNAVAILABLE:
        return [
            await server(client),
            await persistence(client),
            await eviction(client),
            await namespace(client, prefix),
            await clock(client),
        ]


async def server(client: Redis) -> Row:
    """The server's version and mode (standalone, sentinel, cluster)."""
    info = await client.info("server")
    return ("redis", "ok", f"Redis {info['redis_version']} ({info.get('redis_mode', '?')})")


async def _config(client: Redis, *names: str) -> dict[str, str] | None:
    """``CONFIG GET`` of ``names``, or ``None`` where CONFIG is disabled (managed Redis)."""
    try:
        found: dict[Any, Any] = {}
        for name in names:
            found |= await client.config_get(name)
    except ResponseError:  # renamed or disabled: "unknown command", a NOPERM, …
        return None
    return {_text(key): _text(value) for key, value in found.items()}


async def persistence(client: Redis) -> Row:
    """Whether the append-only file or RDB snapshots keep the tasks across a restart, and
    what a crash can lose. Both off is a warning: a restart loses every task."""
    config = await _config(client, "appendonly", "appendfsync", "save")
    if config is None:
        return await _persistence_from_info(client)
    aof = config.get("appendonly") == "yes"
    snapshots = config.get("save", "").strip()
    rdb = f"RDB snapshots on ({snapshots!r})" if snapshots else "RDB snapshots off"
    if aof:
        fsync = config.get("appendfsync", "everysec")
        loss = APPENDFSYNC_LOSS.get(fsync, "an unknown appendfsync")
        return ("persistence", "ok", f"AOF on, appendfsync {fsync}: {loss}; {rdb}")
    if snapshots:
        return (
            "persistence",
            "ok",
            f"AOF off, {rdb}: a crash loses every write since the last snapshot",
        )
    return (
        "persistence",
        "warn",
        "AOF and RDB are both off: a restart of Redis loses every task "
        "(turn on appendonly, with appendfsync always or everysec)",
    )


async def _persistence_from_info(client: Redis) -> Row:
    """``INFO persistence`` where CONFIG is disabled: it shows whether the AOF is on, not
    the fsync policy nor the snapshot schedule (only whether snapshots were taken)."""
    info = await client.info("persistence")
    unknown = "CONFIG is disabled here, so appendfsync and the save schedule are unknown"
    if int(info.get("aof_enabled", 0)):
        return ("persistence", "ok", f"AOF on ({unknown}; see the provider's durability)")
    if int(info.get("rdb_saves", 0)) or int(info.get("rdb_last_bgsave_time_sec", -1)) >= 0:
        loss = "a crash loses every write since the last snapshot"
        return ("persistence", "ok", f"AOF off, RDB snapshots taken: {loss} ({unknown})")
    return (
        "persistence",
        "warn",
        f"AOF off and no RDB snapshot since the server started: a restart of Redis may lose "
        f"every task ({unknown})",
    )


async def eviction(client: Redis) -> Row:
    """Whether Redis may evict the store's keys at ``maxmemory`` (any policy but
    ``noeviction`` can: a task's hash carries an expiry): an evicted task is silently lost."""
    info = await client.info("memory")
    policy = _text(info.get("maxmemory_policy", "unknown"))
    if policy in SAFE_POLICIES:
        return ("eviction", "ok", f"maxmemory-policy {policy}: tasks are never evicted")
    return (
        "eviction",
        "warn",
        f"maxmemory-policy {policy}: at maxmemory Redis may evict tasks (use noeviction)",
    )


async def namespace(client: Redis, prefix: str) -> Row:
    """How many keys the namespace has (a SCAN of its hash tag) and how many tasks."""
    keys = 0
    async for _ in client.scan_iter(match="{" + prefix + "}:*", count=1000):
        keys += 1
    tasks = await client.zcard("{" + prefix + "}:rows")
    return (
        "namespace",
        "ok",
        f"prefix {prefix!r}: {keys} key{'s' if keys != 1 else ''}, "
        f"{tasks} task{'s' if tasks != 1 else ''}",
    )


async def clock(client: Redis) -> Row:
    """The server's ``TIME`` against this machine's clock (the store keeps time by TIME)."""
    sent = time.time()
    seconds, micros = await client.time()
    received = time.time()
    return clock_skew_row(int(seconds) * 1000 + int(micros) / 1000, sent, received)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
