"""Task-changed signals between processes on one Redis namespace: pub/sub.

One channel per key prefix (``{prefix}:changes``; pub/sub channels are server-wide, so two
logical databases with the same prefix share it, which only costs a spurious re-read). A
signal is a digest of the task id (:func:`mcp_tasks.runtime.notifier.signal_key`),
published by the engine or runner after the store's write succeeded, never from the
store's scripts. Pub/sub delivers to whoever listens now; a process that was not listening
misses the signal and falls back to polling, as every waiter does.

A signal this relay publishes while it listens comes back to it; its notifier woke its own
subscribers as it sent, so the relay drops it. A message does not say who published it, so
the relay counts the signals it sent per key and drops as many of that key as it hears
(pub/sub keeps one connection's messages in order and loses none while the link lives; a
link that fails clears the count). Another process's signal of the same key heard before
the echo is dropped in its place, and the echo, coming after that write, is delivered.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import anyio
from redis.asyncio import Redis

from mcp_tasks.domain.models import StoreOptions
from mcp_tasks.runtime.notifier import RelayNotifier

if TYPE_CHECKING:
    from collections.abc import Callable

logger = logging.getLogger(__name__)

#: The relay's bound when it is built without a store's (``StoreOptions.timeout_ms``).
DEFAULT_TIMEOUT_S = StoreOptions().timeout_ms / 1000
#: Seconds of silence on the listening connection before a PING asks whether it is alive;
#: a PING unanswered as long again means the link is dead.
HEALTH_CHECK_S = 5.0


def channel_of(prefix: str) -> str:
    """The pub/sub channel of the namespace ``prefix``."""
    return "{" + prefix + "}:changes"


_DRIVER_SCHEMES = {"redis+unix": "unix"}


def driver_url(url: str) -> str:
    """``url`` as redis-py reads it (``redis+unix://`` is its ``unix://``)."""
    scheme, rest = url.split("://", 1)
    return f"{_DRIVER_SCHEMES.get(scheme.lower(), scheme)}://{rest}"


class RedisRelay:
    """Carries signal keys between processes sharing one Redis namespace."""

    #: Pub/sub loses no message while its link lives, and a dead link raises (at the
    #: latest after two health checks): none is lost unsaid.
    complete = True

    def __init__(
        self,
        connect_url: str,
        prefix: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        health_check_s: float = HEALTH_CHECK_S,
    ) -> None:
        self._connect_url = connect_url
        self._timeout_s = timeout_s  # the store's bound, on connecting and on each send
        self._health_check_s = health_check_s
        self.channel = channel_of(prefix)
        self._client: Redis | None = None
        #: While listening: the signals sent and not heard back yet, by key.
        self._echoes: dict[str, int] | None = None

    def __repr__(self) -> str:
        return f"RedisRelay(channel={self.channel!r})"

    def _redis(self) -> Redis:
        if self._client is None:
            self._client = Redis.from_url(
                driver_url(self._connect_url),
                decode_responses=True,
                # RESP2: a subscribed connection answers PING with a `pong` message, which
                # get_message returns. Under RESP3 (redis-py's default) the answer is a bare
                # PONG that get_message drops, as if nothing had come.
                protocol=2,
                # the pub/sub reads wait with their own timeout, not the socket's
                socket_timeout=self._timeout_s,
                socket_connect_timeout=self._timeout_s,
            )
        return self._client

    async def send(self, key: str) -> None:
        echoes = self._echoes
        if echoes is None:  # not listening: nothing comes back
            await self._redis().publish(self.channel, key)
            return
        echoes[key] = echoes.get(key, 0) + 1  # before the publish: its echo may come first
        try:
            await self._redis().publish(self.channel, key)
        except BaseException:
            # Not published, or not known to be: a stray echo only wakes a subscriber.
            _heard(echoes, key)
            raise

    async def receive(
        self, deliver: Callable[[str | None], None], ready: Callable[[], None]
    ) -> None:
        # Every reply comes back as a message (subscribe confirmations and pongs too), so
        # get_message's None means only: nothing arrived for health_check_s.
        pubsub: Any = self._redis().pubsub(ignore_subscribe_messages=False)
        try:
            await pubsub.subscribe(self.channel)
            await self._redis().ping()  # the sending connection, now, not on the first change
            echoes = self._echoes = {}
            ready()
            pinged = False
            while True:
                message = await pubsub.get_message(timeout=self._health_check_s)
                if message is None:
                    if pinged:  # the notifier says so and listens again on a new link
                        raise ConnectionError(
                            f"no answer to a PING within {self._health_check_s:g} s"
                        )
                    await pubsub.ping()  # a closed link raises here
                    pinged = True
                    continue
                pinged = False
                if message.get("type") == "message":
                    key = str(message["data"])
                    if not _heard(echoes, key):
                        deliver(key)
        finally:
            self._echoes = None
            with anyio.CancelScope(shield=True):  # runs when the notifier stops (cancelled)
                await pubsub.aclose()

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


def _heard(echoes: dict[str, int], key: str) -> bool:
    """Count one signal of ``key`` as heard back; whether one was awaited."""
    awaited = echoes.get(key, 0)
    if not awaited:
        return False
    if awaited == 1:
        del echoes[key]
    else:
        echoes[key] = awaited - 1
    return True


def relay_notifier(connect_url: str, prefix: str, *, timeout_s: float) -> RelayNotifier:
    """Pub/sub on namespace ``prefix`` of the Redis at ``connect_url`` (what the Redis
    store offers as its notifier)."""
    return RelayNotifier(RedisRelay(connect_url, prefix, timeout_s=timeout_s))
