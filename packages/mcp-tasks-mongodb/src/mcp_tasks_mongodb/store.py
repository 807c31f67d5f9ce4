"""The MongoDB Store: one document per task, on PyMongo's own async API (``AsyncMongoClient``).

A namespace is a database (the URL's path, default ``mcp_tasks``) and a collection prefix
(``?prefix=``, default ``mcp_tasks``): ``<prefix>_tasks`` holds one document per task,
``<prefix>_meta`` the create lock.

A task document holds the record's columns (:func:`mcp_tasks.stores.codec.columns_of`,
``_id`` being the task id) as BSON fields, the claim as three fields (``claim_worker``,
``claim_token``, ``claim_expires_at``), and everything else as one JSON string
(``payload``: BSON cannot keep every JSON-safe value exactly, e.g. NUL in keys). Three more
fields serve the store: ``v``, a random write version every write replaces; ``runnable``,
whether the status machine allows a claim and the task has work; ``lane`` (``ready``: runnable,
unclaimed, no retry pending; ``waiting``: runnable but claimed or retrying, until
``wait_until``; else none), so that a claim without an id walks only tasks it can take;
``retain_from``, for a finished task without TTL, when its terminal retention started;
``gone_at``, the date the TTL index deletes the document (``expires_at`` plus a grace).
Queries by anything but ``_id`` are plain range predicates on one index each (no ``$expr``
in a filter: not every server's planner uses an index for it).

Time is the server's. ``get`` and the reads of ``update``, ``cancel`` and ``put_status``
read the document with ``$$NOW`` added to it (one aggregation by ``_id``); the shared rules
(:mod:`mcp_tasks.domain.rules`) compute the write; a compare-and-set on ``v`` persists it,
else the store reads again. ``claim`` by id, ``renew`` and ``release`` are one update by
``_id`` each whose pipeline restates ``rules.apply_claim``, ``apply_renew`` and
``apply_release`` on the fields, guarded by ``rules.claimable`` / the lease checks at the
update's ``$$NOW`` (when the guard fails the document keeps every field and the store
sees its own new version missing). A ``claim`` without an id first moves the waiting
tasks whose time came to the ready lane, then reads the ready lane's ids in
``rules.claim_order`` (a page at a time) and claims them by id until one is eligible.
``create`` and ``reap`` read the server's clock from ``hello``.

The caps: ``create`` checks them and inserts while it holds the namespace's create lock (a
document in ``<prefix>_meta`` taken with a conditional ``find_one_and_update`` on the
server's clock, held at most ``_LOCK_MS``). The same document keeps ``bound``, an upper
bound of the unexpired rows, which taking the lock returns in the same round trip: while
it is below ``max_rows`` the create inserts without counting; otherwise it counts the
unexpired rows exactly (up to the cap) and refuses or inserts. The unlock (one update)
adds the create's row to the bound, and after an exact count sets it to that count plus
the row. Nothing ever lowers it otherwise: the TTL monitor deletes documents behind the
store's back and ``reap`` deletes rows that may or may not be in it, so a decrement could
make it too low, while an over-estimate only costs an exact count. It stays an upper
bound because unexpired rows only ever come from creates (an expired task never becomes
unexpired again: the writes that move ``expires_at`` later only take unexpired tasks) and
every create under the lock raises it after its insert (one whose insert failed in an
unknown way raises it too). (One edge is older than the bound: ``update``, ``cancel`` and
``put_status`` decide at their read's now, so one that reads a task just before it expires
and writes just after may keep it unexpired; an exact count between the two misses it, as
it did when every create counted.) A holder that stalled past ``_LOCK_MS`` loses the lock;
its late unlock adds only its row, and the create that took the lock from it counts exactly
(the stalled holder's row may be missing from the bound). A namespace created before
the bound existed counts once. The per-owner cap is counted at every create (a bound per
owner would need a document per owner); a handle with only that cap raises the bound too.
Handles with a row cap, whatever its value, share the one bound. Handles without any cap
insert without the lock and leave the bound alone (raising it would turn their ``hello``
into a write to the one document every create contends for): beside capped handles on one
namespace, the bound misses their rows until the capped handles' next exact count, so
those may create up to ``max_rows`` minus the bound at their last count before they count
again and see them. ``INV-CAP`` is stated for handles with the same options.
No multi-document transaction is used, so a standalone server and
a replica set behave alike.

The TTL index (``gone_at``) is only a janitor: a task is missing from the moment it
expires by the server's clock whether or not its document is still there; the monitor
deletes it ``janitor_grace_ms`` later (until then its id stays taken, S-CREATE.4), and
``reap`` deletes what is due sooner.
"""

from __future__ import annotations

import asyncio
import random
import re
import secrets
import time
import weakref
from contextlib import contextmanager, suppress
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple, Self, TypeVar
from urllib.parse import unquote, urlsplit

from pymongo import ASCENDING, AsyncMongoClient, IndexModel, ReturnDocument
from pymongo.errors import DuplicateKeyError, PyMongoError

from mcp_tasks.domain import rules
from mcp_tasks.domain.errors import (
    DuplicateTaskId,
    InvalidArgument,
    MCPTasksError,
    StaleLease,
    StoreUnavailable,
    TaskLimitReached,
)
from mcp_tasks.domain.ids import new_token
from mcp_tasks.domain.jsonsafe import dumps, loads
from mcp_tasks.domain.models import Claimed, Lease, StoreOptions
from mcp_tasks.domain.states import Event, TaskStatus, next_status
from mcp_tasks.stores.codec import columns_of, payload_of, record_from
from mcp_tasks.stores.opening import mask_password, query_value, with_query
from mcp_tasks.stores.read_modify_write import ReadModifyWrite

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from pymongo.asynchronous.collection import AsyncCollection
    from pymongo.asynchronous.database import AsyncDatabase

    from mcp_tasks.domain.models import NewTask, TaskRecord
    from mcp_tasks.domain.rules import OwnerArg

R = TypeVar("R")
Document = dict[str, Any]

DEFAULT_DATABASE = "mcp_tasks"
DEFAULT_PREFIX = "mcp_tasks"
SCHEMES = ("mongodb", "mongodb+srv")
#: How long after a task expires the TTL monitor may delete its document (S-CREATE.4:
#: the id stays taken until then, or until ``reap``).
DEFAULT_JANITOR_GRACE_MS = 3_600_000
_PREFIX = re.compile(r"[A-Za-z0-9_-]{1,64}")
_DATABASE = re.compile(r"[A-Za-z0-9_-]{1,63}")
DRIVER_ERRORS: tuple[type[BaseException], ...] = (PyMongoError, OSError, TimeoutError)

#: The create lock's longest hold: a holder stalled longer loses it to the next create.
_LOCK_MS = 30_000
_LOCK_ID = "create"
#: How many ready tasks a claim without an id reads at a time.
_CLAIM_PAGE = 16
#: How long a create waits for the lock before giving up (StoreUnavailable).
_LOCK_WAIT_S = 60.0

#: Statuses the status machine lets a claim (and a renew) take: the live ones.
CLAIMABLE = [s.value for s in TaskStatus if next_status(s, Event.CLAIM) is not None]
RENEWABLE = [s.value for s in TaskStatus if next_status(s, Event.RENEW) is not None]
LIVE = [s.value for s in TaskStatus if not s.is_terminal]

#: The indexes ``migrate`` creates (and the first use of a handle): name → keys, options.
INDEXES: dict[str, tuple[list[tuple[str, int]], dict[str, Any]]] = {
    # claim without an id: the ready lane in rules.claim_order.
    "claim_order": ([("lane", ASCENDING), ("created_at", ASCENDING), ("_id", ASCENDING)], {}),
    # the waiting lane by the time its tasks may become claimable.
    # (only the waiting lane has a wait_until: one key, so the range is exactly the due ones)
    "waiting": ([("wait_until", ASCENDING)], {}),
    # the row cap (unexpired rows) and reap (expired rows).
    "expiry": ([("expires_at", ASCENDING)], {}),
    # the per-owner cap (an owner's live, unexpired tasks).
    "owner_active": (
        [("owner", ASCENDING), ("status", ASCENDING), ("expires_at", ASCENDING)],
        {},
    ),
    # reap of finished tasks without a TTL, after the terminal retention.
    "retained": ([("retain_from", ASCENDING)], {}),
    # the janitor: the TTL monitor deletes a document once its gone_at has passed.
    "janitor": ([("gone_at", ASCENDING)], {"expireAfterSeconds": 0}),
}

_NOW: Document = {"$toLong": "$$NOW"}


def _read_pipeline(task_id: str) -> list[Document]:
    """A read by ``_id``: the whole document (what a stored task holds beyond the record
    is a few small fields) and the server's now as ``now``, a date. An aggregation: a find's
    projection may not read ``$$NOW`` on every server, and a find filter with ``$expr`` may
    not use the ``_id`` index on every server. ``$addFields`` of the bare date is the
    cheapest stage that adds it: no field list to apply, no conversion on the server."""
    return [{"$match": {"_id": task_id}}, {"$addFields": {"now": "$$NOW"}}]


def _or_null(field: str, test: Document) -> Document:
    """``field`` is null or passes ``test`` (in an aggregation expression, null sorts
    below every number, so each comparison says what null means)."""
    return {"$or": [{"$eq": [f"${field}", None]}, test]}


#: rules.claimable on the fields, at the server's now (``runnable`` checked beside it).
_CLAIMABLE_NOW: Document = {
    "$and": [
        _or_null("retry_at", {"$lte": ["$retry_at", _NOW]}),
        _or_null("expires_at", {"$gt": ["$expires_at", _NOW]}),
        _or_null("claim_expires_at", {"$lte": ["$claim_expires_at", _NOW]}),
    ]
}


#: Per event loop, kind and namespace: in-process queues (creates before the server's create
#: lock, claims without an id).
_LOCAL_LOCKS: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str, ...], asyncio.Lock]
]
_LOCAL_LOCKS = weakref.WeakKeyDictionary()


def _local_lock(*namespace: str) -> asyncio.Lock:
    locks = _LOCAL_LOCKS.setdefault(asyncio.get_running_loop(), {})
    return locks.setdefault(namespace, asyncio.Lock())


@contextmanager
def _driver_errors() -> Iterator[None]:
    """Driver failures surface as StoreUnavailable with the driver error as cause."""
    try:
        yield
    except MCPTasksError:
        raise
    except DRIVER_ERRORS as exc:
        raise StoreUnavailable from exc


def _new_version() -> str:
    """A fresh write version: random, so a re-created id never meets an old version."""
    return secrets.token_hex(8)


_EPOCH = datetime(1970, 1, 1)  # naive UTC, as PyMongo decodes BSON dates


def _epoch_ms(moment: datetime) -> int:
    """A BSON date (naive UTC, as PyMongo decodes it by default) as epoch ms, exactly:
    integer arithmetic (a float timestamp times 1000 can land a millisecond low)."""
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def _gone_at(expires_at: int | None, grace_ms: int) -> datetime | None:
    if expires_at is None:
        return None
    return datetime.fromtimestamp((expires_at + grace_ms) / 1000, tz=UTC)


def document_of(record: TaskRecord, grace_ms: int) -> Document:
    """The task document of ``record`` (see the module docstring), with a fresh version."""
    columns = columns_of(record)
    del columns["task_id"]
    payload = payload_of(record)
    payload["claim"] = None  # the claim lives in its own fields, which claims update
    claim = record.claim
    runnable = record.work is not None and next_status(record.status, Event.CLAIM) is not None
    waits = [t for t in (record.retry_at, None if claim is None else claim.expires_at) if t]
    return {
        "_id": record.task_id,
        **columns,
        "runnable": runnable,
        "lane": None if not runnable else "waiting" if waits else "ready",
        "wait_until": max(waits) if runnable and waits else None,
        # only claims, renewals and releases write without this function: none ends a task
        "retain_from": record.last_updated_at
        if record.status.is_terminal and record.ttl_ms is None
        else None,
        "claim_worker": None if claim is None else claim.worker_id,
        "claim_token": None if claim is None else claim.token,
        "payload": dumps(payload),
        "v": _new_version(),
        "gone_at": _gone_at(record.expires_at, grace_ms),
    }


def record_of(document: Mapping[str, Any]) -> TaskRecord:
    """The record a task document holds."""
    payload = loads(document["payload"])
    assert isinstance(payload, dict)
    ends = document["claim_expires_at"]
    payload["claim"] = (
        None
        if ends is None
        else {
            "worker_id": document["claim_worker"],
            "token": document["claim_token"],
            "expires_at": ends,
        }
    )
    return record_from({**document, "task_id": document["_id"]}, payload)


def _held_until(until: Document, grace_ms: int) -> list[Document]:
    """rules.held_until as pipeline stages: ``expires_at = max(expires_at, until)`` (a task
    without TTL stays without), ``ttl_ms`` and ``gone_at`` following."""
    return [
        {
            "$set": {
                "expires_at": {
                    "$cond": [
                        {"$and": [{"$ne": ["$expires_at", None]}, {"$lt": ["$expires_at", until]}]},
                        until,
                        "$expires_at",
                    ]
                }
            }
        },
        {
            "$set": {
                "ttl_ms": {
                    "$cond": [
                        {"$eq": ["$expires_at", None]},
                        None,
                        {"$subtract": ["$expires_at", "$created_at"]},
                    ]
                },
                "gone_at": {
                    "$cond": [
                        {"$eq": ["$expires_at", None]},
                        None,
                        {"$toDate": {"$add": ["$expires_at", grace_ms]}},
                    ]
                },
            }
        },
    ]


def _guarded(condition: Document, stages: list[Document]) -> list[Document]:
    """``stages`` (``$set`` stages) applied only where ``condition`` holds, decided once at
    the start (the server's now in it is the update's): elsewhere every field keeps its
    value. A query filter with ``$expr`` may not use an index on every server; a guard in
    the pipeline of an update by ``_id`` always does."""
    guarded: list[Document] = [{"$set": {"_ok": condition}}]
    for stage in stages:
        fields = stage["$set"]
        guarded.append(
            {
                "$set": {
                    name: {"$cond": ["$_ok", value, f"${name}"]} for name, value in fields.items()
                }
            }
        )
    guarded.append({"$unset": "_ok"})
    return guarded


class _Lock(NamedTuple):
    """The create lock as taken: its holder token, the server's now, the bound of the
    unexpired rows (``None`` when it cannot be trusted: never set, or the lock was taken
    from a holder that stalled) and the bound as stored (0 when never set)."""

    holder: str
    now: int
    bound: int | None
    stored: int


class MongoTaskStore(ReadModifyWrite):
    """A :class:`~mcp_tasks.stores.protocol.Store` in MongoDB; ``database`` and ``prefix``
    are its namespace."""

    def __init__(
        self,
        url: str,
        options: StoreOptions | None = None,
        *,
        database: str = DEFAULT_DATABASE,
        prefix: str = DEFAULT_PREFIX,
        janitor_grace_ms: int = DEFAULT_JANITOR_GRACE_MS,
    ) -> None:
        if not _PREFIX.fullmatch(prefix):
            raise ValueError("prefix must be 1-64 letters, digits, '_' or '-'")
        if not _DATABASE.fullmatch(database):
            raise ValueError("the database name must be 1-63 letters, digits, '_' or '-'")
        if urlsplit(url).scheme.lower() not in SCHEMES:
            raise ValueError("A MongoDB store URL looks like mongodb://host:27017/database")
        if janitor_grace_ms < 0:
            raise ValueError("janitor_grace_ms must not be negative")
        self.connect_url, self.database, self.prefix = url, database, prefix
        self.options = options or StoreOptions()
        self.janitor_grace_ms = janitor_grace_ms
        self._client: AsyncMongoClient[Document] | None = None
        self._indexed = False
        self._index_lock = asyncio.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return f"MongoTaskStore(url={self.url!r}, max_rows={self.options.max_rows})"

    @property
    def url(self) -> str:
        """The URL that opens this store's namespace again (a password masked)."""
        parts = urlsplit(self.connect_url)
        url = parts._replace(path=f"/{self.database}").geturl()
        return mask_password(with_query(url, prefix=self.prefix))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Release the store's connections. Idempotent."""
        self._closed = True
        client, self._client = self._client, None
        if client is not None:
            with _driver_errors():
                await client.close()

    # --- plumbing -----------------------------------------------------------------------

    def _db(self) -> AsyncDatabase[Document]:
        if self._closed:
            raise StoreUnavailable("The store is closed")
        if self._client is None:
            self._client = AsyncMongoClient(self.connect_url, tz_aware=False)
        return self._client[self.database]

    @property
    def _tasks_name(self) -> str:
        return f"{self.prefix}_tasks"

    @property
    def _meta_name(self) -> str:
        return f"{self.prefix}_meta"

    async def _tasks(self) -> AsyncCollection[Document]:
        """The task collection, its indexes created on this handle's first use."""
        db = self._db()
        if not self._indexed:
            async with self._index_lock:
                if not self._indexed:
                    await self._create_indexes(db)
        return db[self._tasks_name]

    async def _create_indexes(self, db: AsyncDatabase[Document]) -> bool:
        """Create the indexes and the lock document, idempotently; whether any was new."""
        with _driver_errors():
            tasks = db[self._tasks_name]
            existing = {index["name"] async for index in await tasks.list_indexes()}
            missing = [
                IndexModel(keys, name=name, **kwargs)
                for name, (keys, kwargs) in INDEXES.items()
                if name not in existing
            ]
            if missing:
                await tasks.create_indexes(missing)
            # DuplicateKeyError: another handle created it at the same moment.
            with suppress(DuplicateKeyError):
                await db[self._meta_name].update_one(
                    {"_id": _LOCK_ID},
                    {"$setOnInsert": {"holder": None, "until": 0}},
                    upsert=True,
                )
        self._indexed = True
        return bool(missing)

    async def migrate(self) -> bool:
        """Create the indexes (and the create lock); ``False`` when they were all there."""
        return await self._create_indexes(self._db())

    async def _server_now(self) -> int:
        """The server's clock (epoch ms), from ``hello``."""
        with _driver_errors():
            hello = await self._db().client.admin.command("hello")
        return _epoch_ms(hello["localTime"])

    async def _read(self, task_id: str) -> tuple[TaskRecord | None, str | None, int]:
        """The record, its version and the server's now, in one round trip (``now`` is 0
        when there is no such task: nothing about a missing task depends on it)."""
        tasks = await self._tasks()
        with _driver_errors():
            found = await tasks.aggregate(_read_pipeline(task_id))
            documents = await found.to_list()
        if not documents:
            return None, None, 0
        document = documents[0]
        return record_of(document), document["v"], _epoch_ms(document["now"])

    async def _write(self, record: TaskRecord, version: str) -> bool:
        tasks = await self._tasks()
        with _driver_errors():
            written = await tasks.replace_one(
                {"_id": record.task_id, "v": version}, document_of(record, self.janitor_grace_ms)
            )
        return written.matched_count == 1

    async def _modify(
        self, task_id: str, compute: Callable[[TaskRecord | None, int], tuple[R, TaskRecord | None]]
    ) -> R:
        """Read the record and the server's now, let the rules compute the write, persist it
        only if the version is unchanged; on a lost race, read again."""
        while True:
            record, version, now = await self._read(task_id)
            result, write = compute(record, now)
            if write is None:
                return result
            assert version is not None  # the rules write only a record that exists
            if await self._write(write, version):
                return result

    # --- create and the caps ---------------------------------------------------------------

    async def create(self, task: NewTask) -> TaskRecord:
        tasks = await self._tasks()
        cap, per_owner = self.options.max_rows, self.options.max_active_per_owner
        if cap is None and per_owner is None:
            return await self._insert(tasks, rules.new_record(task, await self._server_now()))
        with _driver_errors():
            if await tasks.find_one({"_id": task.task_id}, {"_id": 1}) is not None:
                raise DuplicateTaskId
        # Handles of this process queue here first, so that only one of them at a time
        # asks the server for the lock (the others would only poll it).
        async with _local_lock("create", self.connect_url, self.database, self.prefix):
            lock = await self._lock()
            # What the unlock adds to the bound: a new base (an exact count) minus the
            # bound read with the lock, plus the row once the insert may have happened.
            # Unknown whether the insert happened (a driver error) counts as inserted:
            # an over-estimate is safe, an under-estimate is not.
            reset = written = 0
            try:
                base = await self._rows_bound(tasks, lock)
                reset = base - lock.stored
                if cap is not None and base >= cap:
                    raise TaskLimitReached
                await self._check_owner_cap(tasks, task.owner, lock.now)
                written = 1
                try:
                    return await self._insert(tasks, rules.new_record(task, lock.now))
                except DuplicateTaskId:
                    written = 0
                    raise
            finally:
                await self._unlock(lock.holder, reset + written, written)

    async def _insert(self, tasks: AsyncCollection[Document], record: TaskRecord) -> TaskRecord:
        with _driver_errors():
            try:
                await tasks.insert_one(document_of(record, self.janitor_grace_ms))
            except DuplicateKeyError:
                raise DuplicateTaskId from None
        return record

    @staticmethod
    def _unexpired(now: int) -> Document:
        return {"$or": [{"expires_at": None}, {"expires_at": {"$gt": now}}]}

    async def _rows_bound(self, tasks: AsyncCollection[Document], lock: _Lock) -> int:
        """An upper bound of the unexpired rows before this create (the caller holds the
        create lock): the lock's bound while it is trusted and below the row cap, else an
        exact count (capped at the row cap when the bound is trusted: at the cap, the
        larger of the two, so that the bound never drops below a handle's larger cap)."""
        cap = self.options.max_rows
        if cap is None:
            return lock.stored  # nothing to check: the bound only grows by the row
        if lock.bound is not None and lock.bound < cap:
            return lock.bound
        with _driver_errors():
            if lock.bound is None:  # unknown: count every row, the bound is then exact
                return await tasks.count_documents(self._unexpired(lock.now), hint="expiry")
            rows = await tasks.count_documents(self._unexpired(lock.now), limit=cap, hint="expiry")
        return rows if rows < cap else max(rows, lock.bound)

    async def _check_owner_cap(
        self, tasks: AsyncCollection[Document], owner: str | None, now: int
    ) -> None:
        """TaskLimitReached when the owner's cap is reached (the caller holds the create
        lock). Counted every time: a bound per owner would need a document per owner."""
        per_owner = self.options.max_active_per_owner
        if per_owner is None:
            return
        active = {"owner": owner, "status": {"$in": LIVE}, **self._unexpired(now)}
        with _driver_errors():
            mine = await tasks.count_documents(active, limit=per_owner, hint="owner_active")
        if mine >= per_owner:
            raise TaskLimitReached

    async def _lock(self) -> _Lock:
        """Take the namespace's create lock; the bound comes with it, in the same round trip."""
        meta = self._db()[self._meta_name]
        holder = new_token()
        free: Document = {"$or": [{"$eq": ["$holder", None]}, {"$lte": ["$until", "$now"]}]}
        take: list[Document] = [
            {"$set": {"now": _NOW, "holder": {"$ifNull": ["$holder", None]}}},
            {"$set": {"until": {"$ifNull": ["$until", 0]}}},
            {
                "$set": {
                    "holder": {"$cond": [free, {"$literal": holder}, "$holder"]},
                    "until": {"$cond": [free, {"$add": ["$now", _LOCK_MS]}, "$until"]},
                    # taken from a holder that stalled (or whose unlock failed): the bound
                    # may lack that holder's row, so the taker counts exactly.
                    "stolen": {"$cond": [free, {"$ne": ["$holder", None]}, "$stolen"]},
                }
            },
        ]
        deadline = time.monotonic() + _LOCK_WAIT_S
        pause = 0.004
        while True:
            with _driver_errors():
                try:
                    lock = await meta.find_one_and_update(
                        {"_id": _LOCK_ID}, take, upsert=True, return_document=ReturnDocument.AFTER
                    )
                except DuplicateKeyError:
                    lock = None  # two first upserts met: the loser tries again
            if lock is not None and lock["holder"] == holder:
                bound = lock.get("bound")
                return _Lock(
                    holder,
                    int(lock["now"]),
                    None if bound is None or lock["stolen"] else int(bound),
                    0 if bound is None else int(bound),
                )
            if time.monotonic() > deadline:
                raise StoreUnavailable("The namespace's create lock stayed taken")
            # Another process holds it: back off a little more each time (jittered).
            pause = min(0.2, pause * 1.5)
            await asyncio.sleep(random.uniform(pause / 2, pause))  # noqa: S311 (not secrecy)

    async def _unlock(self, holder: str, grow: int, written: int) -> None:
        """Free the lock and add ``grow`` to the bound, in one update. A holder that lost
        the lock (it stalled past ``_LOCK_MS``) frees nothing and adds only its row."""
        mine: Document = {"$eq": ["$holder", {"$literal": holder}]}
        with _driver_errors():
            await self._db()[self._meta_name].update_one(
                {"_id": _LOCK_ID},
                [
                    {
                        "$set": {
                            "bound": {
                                "$add": [
                                    {"$ifNull": ["$bound", 0]},
                                    {"$cond": [mine, grow, written]},
                                ]
                            },
                            "holder": {"$cond": [mine, None, "$holder"]},
                            "until": {"$cond": [mine, 0, "$until"]},
                        }
                    }
                ],
            )

    # --- the other Store operations ---------------------------------------------------------

    async def get(self, task_id: str, owner: OwnerArg) -> TaskRecord:
        record, _, now = await self._read(task_id)
        return rules.visible(record, owner, now)

    async def claim(
        self, worker_id: str, *, lease_ms: int, task_id: str | None = None
    ) -> Claimed | None:
        """One find_one_and_update by _id: rules.claimable (at the server's now) guards
        rules.apply_claim in its pipeline (the oldest eligible task when no id is given)."""
        if lease_ms <= 0:
            raise InvalidArgument("lease_ms must be positive")
        tasks = await self._tasks()
        ends: Document = {"$add": [_NOW, lease_ms]}
        version = _new_version()
        claim = _guarded(
            {"$and": [{"$eq": ["$runnable", True]}, _CLAIMABLE_NOW]},
            [
                {
                    "$set": {
                        "generation": {"$add": ["$generation", 1]},
                        "claim_worker": {"$literal": worker_id},
                        "claim_token": {"$literal": new_token()},
                        "claim_expires_at": ends,
                        "retry_at": None,
                        "lane": "waiting",
                        "wait_until": ends,
                        "v": version,
                    }
                },
                *_held_until(ends, self.janitor_grace_ms),
            ],
        )
        if task_id is not None:
            document = await self._claim_by_id(tasks, task_id, claim, version)
        else:
            # Claimers of this process take turns: all of them would otherwise race for
            # the same oldest task, and all but one would lose and retry on the server.
            async with _local_lock("claim", self.connect_url, self.database, self.prefix):
                document = await self._claim_next(tasks, claim, version)
        if document is None:
            return None
        record = record_of(document)
        return Claimed(record, rules.lease_of(record))

    async def _claim_by_id(
        self, tasks: AsyncCollection[Document], task_id: str, claim: list[Document], version: str
    ) -> Document | None:
        """The task claimed by the guarded pipeline ``claim``, or None when it was not
        eligible (then the update wrote nothing new: the guard kept every field)."""
        with _driver_errors():
            document = await tasks.find_one_and_update(
                {"_id": task_id}, claim, return_document=ReturnDocument.AFTER
            )
        return document if document is not None and document["v"] == version else None

    async def _claim_next(
        self, tasks: AsyncCollection[Document], claim: list[Document], version: str
    ) -> Document | None:
        """The oldest eligible task (rules.claim_order), claimed: the due waiting tasks
        join the ready lane, then the ready lane is read in claim order, a page of ids at
        a time (only the index's fields), and each is claimed by id until one is eligible.
        Reading ids first keeps the claim itself a single-document update by _id."""
        await self._promote(tasks)
        page: Document = {"lane": "ready"}
        while True:
            with _driver_errors():
                found = tasks.find(
                    page,
                    {"_id": 1, "created_at": 1},
                    sort=[("created_at", ASCENDING), ("_id", ASCENDING)],
                    hint="claim_order",
                    limit=_CLAIM_PAGE,
                )
                candidates = await found.to_list()
            for candidate in candidates:
                document = await self._claim_by_id(tasks, candidate["_id"], claim, version)
                if document is not None:
                    return document
            if len(candidates) < _CLAIM_PAGE:
                return None
            last = candidates[-1]
            page = {
                "lane": "ready",
                "$or": [
                    {"created_at": {"$gt": last["created_at"]}},
                    {"created_at": last["created_at"], "_id": {"$gt": last["_id"]}},
                ],
            }

    async def _promote(self, tasks: AsyncCollection[Document]) -> None:
        """Move the waiting tasks whose time has come (a claim ran out, a retry is due) to
        the ready lane. The lanes only narrow what a claim walks: the claim's guard still
        checks rules.claimable, so a task in the wrong lane is skipped, never wrongly
        taken."""
        now = await self._server_now()
        due: Document = {"wait_until": {"$lte": now}}
        with _driver_errors():
            if await tasks.find_one(due, {"_id": 1}) is not None:  # mostly none: a read
                await tasks.update_many(due, {"$set": {"lane": "ready", "wait_until": None}})

    async def renew(self, lease: Lease, *, lease_ms: int) -> Lease:
        """One find_one_and_update by _id: rules.apply_renew's checks (at the server's now)
        guard the new lease end (and rules.held_until) in its pipeline."""
        if lease_ms <= 0:
            raise InvalidArgument("lease_ms must be positive")
        tasks = await self._tasks()
        ends: Document = {"$add": [_NOW, lease_ms]}
        live: Document = {
            "$and": [
                {"$in": ["$status", RENEWABLE]},
                {"$eq": ["$claim_token", {"$literal": lease.token}]},
                {"$eq": ["$generation", lease.generation]},
                _or_null("expires_at", {"$gt": ["$expires_at", _NOW]}),
                {"$ne": ["$claim_expires_at", None]},
                {"$gt": ["$claim_expires_at", _NOW]},
            ]
        }
        version = _new_version()
        renew = _guarded(
            live,
            [
                {
                    "$set": {
                        "claim_expires_at": ends,
                        "lane": "waiting",
                        "wait_until": ends,
                        "v": version,
                    }
                },
                *_held_until(ends, self.janitor_grace_ms),
            ],
        )
        with _driver_errors():
            document = await tasks.find_one_and_update(
                {"_id": lease.task_id},
                renew,
                projection={"claim_expires_at": 1, "v": 1},
                return_document=ReturnDocument.AFTER,
            )
        if document is None or document["v"] != version:
            raise StaleLease
        return Lease(
            lease.task_id,
            lease.worker_id,
            lease.token,
            lease.generation,
            int(document["claim_expires_at"]),
        )

    async def release(self, lease: Lease) -> None:
        """rules.apply_release as one conditional update: the claim freed if the lease is
        the task's (its token and generation, expired or not), else nothing."""
        tasks = await self._tasks()
        with _driver_errors():
            await tasks.update_one(
                # A token is never None, so a task without a claim does not match.
                {"_id": lease.task_id, "claim_token": lease.token, "generation": lease.generation},
                [
                    {
                        "$set": {
                            "claim_worker": None,
                            "claim_token": None,
                            "claim_expires_at": None,
                            "lane": {
                                "$cond": [
                                    "$runnable",
                                    {"$cond": [{"$eq": ["$retry_at", None]}, "ready", "waiting"]},
                                    None,
                                ]
                            },
                            "wait_until": {"$cond": ["$runnable", "$retry_at", None]},
                            "v": {"$literal": _new_version()},
                        }
                    }
                ],
            )

    def _reapable(self, now: int) -> list[tuple[Document, str]]:
        """rules.is_reapable as two indexed filters (and their indexes): expired, or
        finished without a TTL for longer than the terminal retention."""
        return [
            ({"expires_at": {"$lte": now}}, "expiry"),
            ({"retain_from": {"$lte": now - self.options.terminal_retention_ms}}, "retained"),
        ]

    async def reap(self, *, limit: int = 500) -> int:
        tasks = await self._tasks()
        if limit <= 0:
            return 0
        now = await self._server_now()
        due: list[str] = []
        with _driver_errors():
            for condition, index in self._reapable(now):
                if len(due) < limit:
                    found = tasks.find(condition, {"_id": 1}, limit=limit - len(due), hint=index)
                    due += [document["_id"] async for document in found]
            if not due:
                return 0
            # The filter again: a task renewed since it was found stays.
            again = [condition for condition, _ in self._reapable(now)]
            deleted = await tasks.delete_many({"_id": {"$in": due}, "$or": again}, hint="_id_")
        return deleted.deleted_count

    # --- the doctor ----------------------------------------------------------------------

    async def diagnose(self) -> list[tuple[str, str, str]]:
        """Rows for ``mcp-tasks doctor``: (check, "ok" | "warn" | "fail", detail) for the
        server's version, the topology, this namespace's indexes and the clock skew."""
        try:
            db = self._db()
            with _driver_errors():
                sent = time.time()
                hello = await db.client.admin.command("hello")
                received = time.time()
                build = await db.client.admin.command("buildInfo")
                existing = {i["name"] async for i in await db[self._tasks_name].list_indexes()}
        except StoreUnavailable as error:
            cause = type(error.__cause__).__name__ if error.__cause__ else "closed"
            return [("mongodb server", "fail", f"not reachable ({cause})")]
        rows = [("mongodb version", "ok", str(build.get("version", "unknown")))]
        if "setName" in hello:
            topology = ("ok", f"replica set {hello['setName']!r}")
        elif hello.get("msg") == "isdbgrid":
            topology = ("ok", "sharded cluster (mongos)")
        else:
            topology = ("ok", "standalone")
        rows.append(("mongodb topology", *topology))
        missing = [name for name in INDEXES if name not in existing]
        if missing:
            detail = (
                f"missing {', '.join(missing)} (run `mcp-tasks migrate`; also made on first use)"
            )
            rows.append(("mongodb indexes", "warn", detail))
        else:
            rows.append(("mongodb indexes", "ok", f"all {len(INDEXES)} present"))
        # The server's clock against ours at the middle of the round trip.
        skew = _epoch_ms(hello["localTime"]) - round((sent + received) / 2 * 1000)
        level = "ok" if abs(skew) < 1000 else "warn"
        rows.append(
            ("mongodb clock skew", level, f"{skew:+d} ms (the store uses the server's clock)")
        )
        return rows


async def _drop(connect_url: str, database: str, prefix: str) -> None:
    """Drop the namespace's collections (only for tests and ``drop_namespace``)."""
    with _driver_errors():
        client: AsyncMongoClient[Document] = AsyncMongoClient(connect_url)
        try:
            db = client[database]
            await db.drop_collection(f"{prefix}_tasks")
            await db.drop_collection(f"{prefix}_meta")
            await db.drop_collection(f"{prefix}_signals")  # the notifier's
        finally:
            await client.close()


def _parse(url: str) -> tuple[str, str, str]:
    """The URL PyMongo connects to (without ``prefix``), the database and the prefix."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in SCHEMES:
        raise ValueError(
            "A MongoDB store URL looks like mongodb://[user:password@]host:27017/database?prefix=NAME"
        )
    database = unquote(parts.path.lstrip("/")) or DEFAULT_DATABASE
    if not _DATABASE.fullmatch(database):
        raise ValueError("A MongoDB store's database name is letters, digits, '_' or '-'")
    prefix = query_value(url, "prefix") or DEFAULT_PREFIX
    if not _PREFIX.fullmatch(prefix):
        raise ValueError("A MongoDB store's ?prefix= is letters, digits, '_' or '-'")
    return with_query(url, prefix=None), database, prefix


class MongoStoreBackend:
    """Opens ``mongodb://[user:password@]host:27017/database`` (or ``mongodb+srv://``);
    the database (default ``mcp_tasks``) and ``?prefix=NAME`` (the collection prefix,
    default ``mcp_tasks``) are the namespace; PyMongo reads every other option."""

    def open(self, url: str, options: StoreOptions | None = None, /) -> MongoTaskStore:
        connect_url, database, prefix = _parse(url)
        return MongoTaskStore(connect_url, options, database=database, prefix=prefix)

    def namespaced(self, url: str, namespace: str, /) -> str:
        _parse(url)
        return with_query(url, prefix=namespace)

    async def drop(self, url: str, /) -> None:
        await _drop(*_parse(url))


def from_url(url: str, options: StoreOptions | None = None) -> MongoTaskStore:
    """The store ``url`` names (see :class:`MongoStoreBackend`)."""
    return backend.open(url, options)


#: The ``mongodb`` and ``mongodb+srv`` entry points of the ``mcp_tasks.stores`` group.
backend = MongoStoreBackend()
