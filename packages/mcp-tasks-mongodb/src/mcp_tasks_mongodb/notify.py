"""Task-changed signals between processes on one MongoDB namespace: a signals collection.

Sending a signal inserts ``{key}`` into ``<prefix>_signals``, a capped collection
(:data:`SIGNALS_MAX_DOCS` documents at most, so it never grows; the tasks collection is
never touched). A signal is a digest of the task id
(:func:`mcp_tasks.runtime.notifier.signal_key`), never the id itself.

Listening is a change stream on that collection (insert events only) where the server
offers change streams (a replica set or a sharded cluster). A standalone ``mongod`` offers
none (its ``hello`` names no replica set, or ``watch`` fails with "only supported on replica
sets"); there the listener reads the collection every :data:`POLL_INTERVAL_S` instead (the
signals of the last :data:`POLL_WINDOW_S`, by their ObjectId's time, each delivered once).
A process that was not listening misses the signals sent meanwhile and falls back to
polling the store, as every waiter does.
"""

from __future__ import annotations

import logging
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

import anyio
import pymongo
from bson import ObjectId
from pymongo import AsyncMongoClient
from pymongo.errors import CollectionInvalid, OperationFailure

from mcp_tasks.domain.models import StoreOptions
from mcp_tasks.runtime.notifier import RelayNotifier
from mcp_tasks.stores.kit import detached
from mcp_tasks_mongodb.driver import hello

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from pymongo.asynchronous.change_stream import AsyncChangeStream
    from pymongo.asynchronous.collection import AsyncCollection

logger = logging.getLogger(__name__)

Document = dict[str, Any]

#: The signals collection's cap: the oldest signals make room for new ones.
SIGNALS_MAX_DOCS: Final = 1000
SIGNALS_MAX_BYTES: Final = 1 << 20
#: Without change streams: how often the listener reads the signals collection.
POLL_INTERVAL_S: Final = 0.05
#: Without change streams: how far back each read looks (by the ObjectId's time, which is
#: the sender's clock, so this also bounds the clock skew between processes it tolerates).
POLL_WINDOW_S: Final = 5.0
#: How long a change stream's getMore waits on the server before it answers empty.
AWAIT_MS: Final = 1000
#: NamespaceExists: another process created the collection at the same moment.
_NAMESPACE_EXISTS: Final = 48
#: "The $changeStream stage is only supported on replica sets".
_NO_CHANGE_STREAMS: Final = frozenset({40573})
_INSERTS: Final[list[Document]] = [{"$match": {"operationType": "insert"}}]


def signals_collection_of(prefix: str) -> str:
    """The signals collection of the namespace ``prefix``."""
    return f"{prefix}_signals"


class MongoRelay:
    """Carries signal keys between processes sharing one MongoDB namespace.

    ``polling=True`` reads the collection every ``poll_interval_s`` even where the server
    offers change streams (what a standalone server gets anyway).
    """

    def __init__(
        self,
        connect_url: str,
        database: str,
        prefix: str,
        *,
        polling: bool = False,
        poll_interval_s: float = POLL_INTERVAL_S,
        timeout_ms: int = StoreOptions().timeout_ms,
    ) -> None:
        self._connect_url = connect_url
        self._timeout_ms = timeout_ms
        self.database = database
        self.collection = signals_collection_of(prefix)
        self.polling = polling
        self.poll_interval_s = poll_interval_s
        self._client: AsyncMongoClient[Document] | None = None
        self._created = False
        #: Whether it follows a change stream, which loses no insert while it lives; the
        #: polled window can (a sender's clock more than the window behind).
        self.complete = False

    def __repr__(self) -> str:
        return (
            f"MongoRelay(database={self.database!r}, collection={self.collection!r}, "
            f"polling={self.polling})"
        )

    async def _signals(self) -> AsyncCollection[Document]:
        """The signals collection, created capped on this relay's first use."""
        if self._client is None:
            # The store's bound on finding the server and connecting; no socket timeout:
            # a change stream's reads wait for changes.
            self._client = AsyncMongoClient(
                self._connect_url,
                tz_aware=False,
                serverSelectionTimeoutMS=self._timeout_ms,
                connectTimeoutMS=self._timeout_ms,
            )
        db = self._client[self.database]
        if not self._created:
            try:
                await db.create_collection(
                    self.collection, capped=True, size=SIGNALS_MAX_BYTES, max=SIGNALS_MAX_DOCS
                )
            except CollectionInvalid:
                pass  # it exists
            except OperationFailure as exc:
                if exc.code != _NAMESPACE_EXISTS:
                    raise
            self._created = True
        return db[self.collection]

    async def send(self, key: str) -> None:
        # Within the store's bound by PyMongo's own deadline, never cancelled (see
        # mcp_tasks_mongodb.driver on why): a caller cancelled meanwhile (its request's
        # bound, its end) stops waiting, and the insert goes on to its deadline.
        with pymongo.timeout(self._timeout_ms / 1000):
            await detached(self._insert(key))

    async def _insert(self, key: str) -> None:
        await (await self._signals()).insert_one({"key": key})

    async def receive(
        self, deliver: Callable[[str | None], None], ready: Callable[[], None]
    ) -> None:
        signals = await self._signals()
        if not self.polling and await self._offers_change_streams():
            try:
                stream = await signals.watch(_INSERTS, max_await_time_ms=AWAIT_MS)
            except OperationFailure as exc:
                if exc.code not in _NO_CHANGE_STREAMS:
                    raise
                logger.info("the MongoDB server offers no change streams; polling signals")
            else:
                self.complete = True
                await _follow(stream, deliver, ready)
                return
        self.complete = False
        await self._poll(signals, deliver, ready)

    async def _offers_change_streams(self) -> bool:
        assert self._client is not None
        return offers_change_streams(await hello(self._client))

    async def _poll(
        self,
        signals: AsyncCollection[Document],
        deliver: Callable[[str | None], None],
        ready: Callable[[], None],
    ) -> None:
        """Read the last :data:`POLL_WINDOW_S` of signals every ``poll_interval_s``; deliver
        those the previous read did not return. (ObjectIds of different senders are not
        ordered within a second, so a window re-read, not a "greater than last" cursor.)"""
        seen = await _recent(signals)  # sent before this listener started: not news
        ready()
        while True:
            await anyio.sleep(self.poll_interval_s)
            recent = await _recent(signals)
            for object_id, key in recent.items():
                if object_id not in seen:
                    deliver(key)
            if len(recent) >= SIGNALS_MAX_DOCS:
                deliver(None)  # the cap may have dropped signals this read never saw
            seen = recent

    async def aclose(self) -> None:
        client, self._client = self._client, None
        self._created = False
        if client is not None:
            await client.close()


def offers_change_streams(hello: Mapping[str, Any]) -> bool:
    """Whether the server that sent this ``hello`` reply offers change streams: a replica set
    member (``setName``) or a ``mongos`` (``msg: isdbgrid``) does, a standalone does not."""
    return "setName" in hello or hello.get("msg") == "isdbgrid"


async def _recent(signals: AsyncCollection[Document]) -> dict[ObjectId, str]:
    since = ObjectId.from_datetime(datetime.now(UTC) - timedelta(seconds=POLL_WINDOW_S))
    found = signals.find({"_id": {"$gte": since}}, {"key": 1}, limit=SIGNALS_MAX_DOCS)
    return {doc["_id"]: str(doc.get("key")) async for doc in found}


async def _follow(
    stream: AsyncChangeStream[Document],
    deliver: Callable[[str | None], None],
    ready: Callable[[], None],
) -> None:
    """Deliver each inserted signal's key until cancelled; raise when the stream ends (the
    collection was dropped: the notifier listens again, creating it)."""
    try:
        ready()
        async for change in stream:
            key = (change.get("fullDocument") or {}).get("key")
            if isinstance(key, str):
                deliver(key)
        raise ConnectionError("the signals change stream ended")
    finally:
        with anyio.CancelScope(shield=True), suppress(Exception):  # the notifier is stopping
            await stream.close()


def relay_notifier(
    connect_url: str, database: str, prefix: str, *, timeout_ms: int
) -> RelayNotifier:
    """A signals collection in namespace ``database``/``prefix`` of the MongoDB at
    ``connect_url`` (what the MongoDB store offers as its notifier)."""
    return RelayNotifier(MongoRelay(connect_url, database, prefix, timeout_ms=timeout_ms))
