"""The MongoDB Store: one document per task (:mod:`mcp_tasks_mongodb.codec`), on PyMongo's
own async API (``AsyncMongoClient``).

A namespace is a database (the URL's path, default ``mcp_tasks``) and a collection prefix
(``?prefix=``, default ``mcp_tasks``; :mod:`mcp_tasks_mongodb.urls`): ``<prefix>_tasks``
holds one document per task, ``<prefix>_meta`` the create lock.

Time is the server's. ``get`` and the reads of ``update``, ``cancel`` and ``put_status``
read the document with ``$$NOW`` added to it (one aggregation by ``_id``); the shared rules
(:mod:`mcp_tasks.domain.rules`) compute the write; a compare-and-set on ``v`` persists it,
else the store reads again. ``claim``, ``renew`` and ``release`` are one update by ``_id``
each whose pipeline restates the rule (:mod:`mcp_tasks_mongodb.pipelines`); a claim
without an id walks the ready lane (:mod:`mcp_tasks_mongodb.claims`). ``create`` and
``reap`` read the server's clock from ``hello``; a capped ``create`` holds the namespace's
create lock (:mod:`mcp_tasks_mongodb.create_lock`).

``<prefix>_counts`` holds the counters (:mod:`mcp_tasks_mongodb.counters`): every write
marks its task document ``dirty`` in the same update, ``reap`` folds the dirty documents
into the counters and deletes the rows due, each a transaction, and ``counts()`` and
``stats()`` read the counters with the dirty documents and the rows past their TTL: a cost
that does not grow with the collection. A task is missing from the moment it expires by the
server's clock whether or not its document is still there; ``reap`` deletes it. On a server
without transactions (a standalone ``mongod``) there are no counters: ``stats()`` and
``counts()`` aggregate the collection, ``reap`` deletes in one statement, and a TTL index on
``gone_at`` is a janitor that deletes an expired document ``janitor_grace_ms`` after its
expiry (until then its id stays taken, S-CREATE.4).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Self, TypeVar

import anyio
import pymongo
from pymongo import AsyncMongoClient, IndexModel, ReturnDocument
from pymongo.errors import DuplicateKeyError

from mcp_tasks.domain import rules
from mcp_tasks.domain.errors import (
    DuplicateTaskId,
    InvalidArgument,
    OwnerTaskLimitReached,
    StaleLease,
    TaskLimitReached,
)
from mcp_tasks.domain.ids import new_token
from mcp_tasks.domain.jsonsafe import loads
from mcp_tasks.domain.models import Claimed, Lease, StoreOptions
from mcp_tasks.stores.kit import CloseGuard
from mcp_tasks.stores.location import with_query
from mcp_tasks.stores.read_modify_write import ReadModifyWrite
from mcp_tasks.stores.stats import counts_of, from_counts
from mcp_tasks_mongodb import claims, counters, create_lock, pipelines, server_checks
from mcp_tasks_mongodb.codec import (
    INDEXES,
    JANITOR,
    document_of,
    epoch_ms,
    new_version,
    record_of,
)
from mcp_tasks_mongodb.driver import (
    Refusals,
    bounded,
    detached_within,
    driver_call,
    driver_timeouts,
    hello,
    server_now,
)
from mcp_tasks_mongodb.notify import relay_notifier
from mcp_tasks_mongodb.provision import MongoTestServers
from mcp_tasks_mongodb.urls import (
    DEFAULT_DATABASE,
    DEFAULT_PREFIX,
    MongoLocation,
    check_names,
    locate,
    shown,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from pymongo.asynchronous.collection import AsyncCollection
    from pymongo.asynchronous.database import AsyncDatabase

    from mcp_tasks.domain.models import NewTask, TaskRecord
    from mcp_tasks.domain.rules import OwnerArg
    from mcp_tasks.runtime.notifier import RelayNotifier
    from mcp_tasks.stores.abilities import Rewrite
    from mcp_tasks.stores.doctor_rows import DiagnosisRow
    from mcp_tasks.stores.stats import StoreCounts, StoreStats
    from mcp_tasks_mongodb.codec import Document

__all__ = ["DEFAULT_JANITOR_GRACE_MS", "MongoStoreBackend", "MongoTaskStore", "backend", "from_url"]

R = TypeVar("R")

#: How long after a task expires the TTL monitor may delete its document (S-CREATE.4:
#: the id stays taken until then, or until ``reap``).
DEFAULT_JANITOR_GRACE_MS = 3_600_000

#: How long the server's clock read by one ``hello`` serves the claims' lanes
#: (``MongoTaskStore._lane_now``), on this process's monotonic clock: an idle runner's
#: claim every second then costs a ``hello`` every ten.
LANE_CLOCK_S = 10.0


def _read_pipeline(task_id: str) -> list[Document]:
    """A read by ``_id``: the whole document (what a stored task holds beyond the record
    is a few small fields) and the server's now as ``now``, a date. An aggregation: a find's
    projection may not read ``$$NOW`` on every server, and a find filter with ``$expr`` may
    not use the ``_id`` index on every server. ``$addFields`` of the bare date is the
    cheapest stage that adds it: no field list to apply, no conversion on the server."""
    return [{"$match": {"_id": task_id}}, {"$addFields": {"now": "$$NOW"}}]


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
        location: MongoLocation | None = None,
    ) -> None:
        check_names(url, database, prefix)
        if janitor_grace_ms < 0:
            raise ValueError("janitor_grace_ms must not be negative")
        self.connect_url, self.database, self.prefix = url, database, prefix
        self.options = options or StoreOptions()
        self.janitor_grace_ms = janitor_grace_ms
        self._location = location
        self._client: AsyncMongoClient[Document] | None = None
        self._refusals = Refusals()  # the client's heartbeats: a refused server fails sooner
        self._indexed = False
        self._counted = False  # the server has transactions: the store keeps counters
        self._index_lock = asyncio.Lock()
        self._guard = CloseGuard()
        #: The last ``hello``'s time (epoch ms) and when it was sent (``time.monotonic()``).
        self._hello: tuple[int, float] | None = None

    def __repr__(self) -> str:
        return f"MongoTaskStore(url={self.url!r}, max_rows={self.options.max_rows})"

    @property
    def url(self) -> str:
        """The URL that opens this store's namespace again (a password masked)."""
        return shown(self.connect_url, self.database, self.prefix)

    @property
    def location(self) -> MongoLocation:
        """Where the store is: the location it was opened at, else its :attr:`url`."""
        if self._location is None:
            self._location = locate(self.url)
        return self._location

    def offer_notifier(self) -> RelayNotifier:
        """A signals collection in the namespace: it hears every process on it."""
        return relay_notifier(
            self.connect_url, self.database, self.prefix, timeout_ms=self.options.timeout_ms
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Release the store's connections. Idempotent."""
        self._guard.close()
        client, self._client = self._client, None
        if client is not None:
            with driver_call():
                await client.close()

    # --- plumbing -----------------------------------------------------------------------

    def _db(self) -> AsyncDatabase[Document]:
        self._guard.check()
        if self._client is None:
            self._client = AsyncMongoClient(
                self.connect_url,
                tz_aware=False,
                event_listeners=[self._refusals],
                **driver_timeouts(self.connect_url, self.options),
            )
        return self._client[self.database]

    @property
    def _tasks_name(self) -> str:
        return f"{self.prefix}_tasks"

    @property
    def _meta_name(self) -> str:
        return f"{self.prefix}_meta"

    @property
    def _counts_name(self) -> str:
        return f"{self.prefix}_counts"

    def _meta(self) -> AsyncCollection[Document]:
        return self._db()[self._meta_name]

    def _local_lock(self, kind: str) -> asyncio.Lock:
        return create_lock.local_lock(kind, self.connect_url, self.database, self.prefix)

    async def _tasks(self) -> AsyncCollection[Document]:
        """The task collection, its indexes created on this handle's first use."""
        db = self._db()
        if not self._indexed:
            async with self._index_lock:
                if not self._indexed:
                    await self._create_indexes(db)
        return db[self._tasks_name]

    async def _create_indexes(self, db: AsyncDatabase[Document]) -> bool:
        """Create the indexes, the lock document and, on a server with transactions, the
        counters (the janitor where there are none), idempotently; whether any was new."""
        with driver_call():
            reply = await hello(db.client)
            counted = "setName" in reply or reply.get("msg") == "isdbgrid"
            tasks = db[self._tasks_name]
            existing = {index["name"] async for index in await tasks.list_indexes()}
            wanted = dict(INDEXES)
            name, keys, kwargs = JANITOR
            if counted and name in existing:  # it would delete rows past the counters
                await tasks.drop_index(name)
            elif not counted:
                wanted[name] = (keys, kwargs)
            missing = [
                IndexModel(keys, name=name, **kwargs)
                for name, (keys, kwargs) in wanted.items()
                if name not in existing
            ]
            if missing:
                await tasks.create_indexes(missing)
            if "claim_type_order" not in existing:
                await _fill_work_types(tasks)
            await create_lock.ensure_lock(db[self._meta_name])
            made = counted and await counters.ensure_counters(tasks, db[self._counts_name])
        self._counted = counted
        self._indexed = True
        return bool(missing) or made

    async def migrate(self) -> bool:
        """Create the indexes (and the create lock), give the claimable tasks of a
        collection from before the ``work_type`` field theirs, and make the counters of a
        collection from before them (on a server with transactions); ``False`` when all
        were there."""
        return await self._create_indexes(self._db())

    async def _server_now(self) -> int:
        """The server's clock (epoch ms), from ``hello``."""
        sent = time.monotonic()
        now = await server_now(self._db())
        self._hello = (now, sent)
        return now

    async def _lane_now(self) -> int:
        """The server's clock as a claim's lanes read it (:func:`claims.promote`, a hint the
        claim's guard checks again at the server's ``$$NOW``): the last ``hello``'s time
        plus the monotonic time since it was sent, while that is under
        :data:`LANE_CLOCK_S`; else a ``hello``. Counted from the send, it runs ahead by up
        to that round trip, never behind: a task promoted a moment early is skipped by the
        guard until its time comes, and none waits for a late one. A step of the server's
        clock is seen at the next ``hello``."""
        if self._hello is not None:
            now, sent = self._hello
            since_s = time.monotonic() - sent
            if since_s < LANE_CLOCK_S:
                return now + int(since_s * 1000) + 1
        return await self._server_now()

    async def _read(self, task_id: str) -> tuple[TaskRecord | None, str | None, int]:
        """The record, its version and the server's now, in one round trip (``now`` is 0
        when there is no such task: nothing about a missing task depends on it)."""
        tasks = await self._tasks()
        with driver_call():
            found = await tasks.aggregate(_read_pipeline(task_id))
            documents = await found.to_list()
        if not documents:
            return None, None, 0
        document = documents[0]
        return record_of(document), document["v"], epoch_ms(document["now"])

    async def _write(self, record: TaskRecord, version: str) -> bool:
        tasks = await self._tasks()
        with driver_call():
            # $set, not a replacement: ``f`` (what the counters hold of it) stays
            written = await tasks.update_one(
                {"_id": record.task_id, "v": version},
                {"$set": document_of(record, self.janitor_grace_ms)},
            )
        return written.matched_count == 1

    async def _modify(
        self, task_id: str, compute: Callable[[TaskRecord | None, int], tuple[R, TaskRecord | None]]
    ) -> R:
        """Read the record and the server's now, let the rules compute the write, persist it
        only if the version is unchanged; on a lost race, read again."""

        async def modify(_deadline: float) -> R:
            while True:
                record, version, now = await self._read(task_id)
                result, write = compute(record, now)
                if write is None:
                    return result
                assert version is not None  # the rules write only a record that exists
                if await self._write(write, version):
                    return result

        return await detached_within(self.options.timeout_ms, modify, self._refusals)

    async def rewrite_after(self, after: str | None, rewrite: Rewrite) -> str | None:
        """The next task by id rewritten in place (``Rewrites``): read it, let ``rewrite``
        compute the payload (``rules.rewritten``), replace it only if its version is
        unchanged; on a lost race (a write came between), read it again."""

        async def rewrite_next(_deadline: float) -> str | None:
            tasks = await self._tasks()
            with driver_call():
                document = await tasks.find_one({"_id": {"$gt": after or ""}}, sort=[("_id", 1)])
            if document is None:
                return None
            record: TaskRecord | None = record_of(document)
            version: str | None = document["v"]
            while record is not None and version is not None:
                written = rules.rewritten(record, rewrite(record))
                if written is None or await self._write(written, version):
                    break
                record, version, _ = await self._read(record.task_id)
            return str(document["_id"])

        return await detached_within(self.options.timeout_ms, rewrite_next, self._refusals)

    # --- create and the caps ---------------------------------------------------------------

    async def create(self, task: NewTask) -> TaskRecord:
        return await detached_within(
            self.options.timeout_ms, lambda deadline: self._create(task, deadline), self._refusals
        )

    async def _create(self, task: NewTask, deadline: float) -> TaskRecord:
        tasks = await self._tasks()
        cap, per_owner = self.options.max_rows, self.options.owner_cap(task.owner)
        if cap is None and per_owner is None:
            return await self._insert(tasks, rules.new_record(task, await self._server_now()))
        if per_owner is None:  # else the id is checked under the lock, beside the owner's bound
            await create_lock.check_new(tasks, task.task_id)
        # Handles of this process queue here first, so that only one of them at a time
        # asks the server for the lock (the others would only poll it).
        async with self._local_lock("create"):
            lock = await create_lock.take(self._meta(), deadline=deadline)
            # What the unlock adds to the bound: a new base (an exact count) minus the
            # bound read with the lock, plus the row once the insert may have happened.
            # Unknown whether the insert happened (a driver error) counts as inserted:
            # an over-estimate is safe, an under-estimate is not.
            reset = written = 0
            distrust = False  # the owner's bound may lack this row: distrust every owner's
            try:
                # Nothing under the lock past its hold (the unlock below may come later).
                with pymongo.timeout(lock.held_s()):
                    # The id check and the owner's bound go at once: one round trip's wait.
                    # Shielded as one driver call: a cancelled gather would cancel its
                    # children's PyMongo calls (see mcp_tasks_mongodb.driver on why never).
                    with driver_call():
                        base, room = await asyncio.gather(
                            create_lock.rows_bound(tasks, lock, cap),
                            self._owner_room(tasks, task, lock, per_owner),
                        )
                    reset = base - lock.stored
                    if room.exists:
                        raise DuplicateTaskId
                    if cap is not None and base >= cap:
                        raise TaskLimitReached
                    if per_owner is not None and room.active >= per_owner:
                        raise OwnerTaskLimitReached
                    written = 1
                    record = rules.new_record(task, lock.now)
                    # The owner's bound rises beside the insert: both land before the unlock,
                    # so the next holder reads a bound that counts this row, whether or not
                    # the insert failed in an unknown way.
                    with driver_call():
                        inserted, raised = await asyncio.gather(
                            self._insert(tasks, record),
                            self._raise_owner_bound(record, lock, room),
                            return_exceptions=True,
                        )
                    distrust = isinstance(raised, BaseException)
                    if isinstance(inserted, DuplicateTaskId):
                        written = 0
                    if isinstance(inserted, BaseException):
                        raise inserted
                    if isinstance(raised, BaseException):
                        raise raised
                    return inserted
            finally:
                await create_lock.unlock(
                    self._meta(),
                    lock.holder,
                    reset + written,
                    written,
                    owner=task.owner,
                    distrust=distrust,
                )

    async def _owner_room(
        self,
        tasks: AsyncCollection[Document],
        task: NewTask,
        lock: create_lock.Lock,
        per_owner: int | None,
    ) -> create_lock.OwnerRoom:
        if per_owner is None:  # the id was checked before the lock
            return create_lock.OwnerRoom(exists=False, active=0, off_by=None)
        return await create_lock.owner_room(tasks, self._meta(), task, lock, per_owner)

    async def _raise_owner_bound(
        self, record: TaskRecord, lock: create_lock.Lock, room: create_lock.OwnerRoom
    ) -> None:
        """Raise the new task's owner's bound by its row; after an exact count, set it to
        that count plus the row, trusted in the lock's epoch."""
        if record.owner is None:
            return
        off_by, epoch = (0, None) if room.off_by is None else (room.off_by, lock.epoch)
        await create_lock.raise_owner_bound(self._meta(), record.owner, off_by + 1, epoch)

    async def _insert(self, tasks: AsyncCollection[Document], record: TaskRecord) -> TaskRecord:
        with driver_call():
            try:
                await tasks.insert_one(document_of(record, self.janitor_grace_ms))
            except DuplicateKeyError:
                raise DuplicateTaskId from None
        return record

    # --- the other Store operations ---------------------------------------------------------

    async def get(self, task_id: str, owner: OwnerArg) -> TaskRecord:
        read = await detached_within(
            self.options.timeout_ms, lambda _: self._read(task_id), self._refusals
        )
        record, _, now = read
        return rules.visible(record, owner, now)

    async def claim(
        self,
        worker_id: str,
        *,
        lease_ms: int,
        task_id: str | None = None,
        work_types: rules.WorkTypes = None,
    ) -> Claimed | None:
        """One find_one_and_update by _id (:func:`pipelines.claim`: rules.claimable at the
        server's now guards rules.apply_claim, the filter selects the work types); the
        oldest eligible task of the types when no id is given (:func:`claims.claim_next`)."""
        if lease_ms <= 0:
            raise InvalidArgument("lease_ms must be positive")
        if work_types is not None and not work_types:
            return None  # no type asked for: nothing is eligible
        tasks = await self._tasks()
        version = new_version()
        claim = pipelines.claim(
            worker_id,
            token=new_token(),
            lease_ms=lease_ms,
            version=version,
            grace_ms=self.janitor_grace_ms,
        )
        with bounded(self.options.timeout_ms):
            if task_id is not None:
                document = await claims.claim_by_id(tasks, task_id, claim, version, work_types)
            else:
                # Claimers of this process take turns: all of them would otherwise race for
                # the same oldest task, and all but one would lose and retry on the server.
                async with self._local_lock("claim"):
                    now = await self._lane_now()
                    document = await claims.claim_next(tasks, claim, version, now, work_types)
        if document is None:
            return None
        record = record_of(document)
        return Claimed(record, rules.lease_of(record))

    async def renew(self, lease: Lease, *, lease_ms: int) -> Lease:
        """One find_one_and_update by _id (:func:`pipelines.renew`: rules.apply_renew's
        checks, at the server's now, guard the new lease end and rules.held_until)."""
        if lease_ms <= 0:
            raise InvalidArgument("lease_ms must be positive")
        tasks = await self._tasks()
        version = new_version()
        with driver_call():
            document = await tasks.find_one_and_update(
                {"_id": lease.task_id},
                pipelines.renew(
                    lease, lease_ms=lease_ms, version=version, grace_ms=self.janitor_grace_ms
                ),
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
        """One conditional update (:func:`pipelines.release`, rules.apply_release): the
        claim freed if the lease is the task's (its token and generation, expired or not),
        else nothing."""
        tasks = await self._tasks()
        match, update = pipelines.release(lease, new_version())
        with driver_call():
            await tasks.update_one(match, update)

    def _reapable(self, now: int) -> list[tuple[Document, str]]:
        return pipelines.reapable(now, self.options.terminal_retention_ms)

    async def reap(self, *, limit: int = 500) -> int:
        """Delete up to ``limit`` tasks due: found by their indexes, deleted if they are still
        due (a task renewed since it was found stays); on a server with transactions, in one
        transaction that takes them from the counters (:func:`counters.reap_counted`), and
        then the documents written since the last fold are folded into the counters
        (:func:`counters.fold`) for at most half of what is left of the bound (the next
        reap folds the rest)."""
        tasks = await self._tasks()
        if limit <= 0:
            return 0
        now = await self._server_now()
        due: list[str] = []
        with bounded(self.options.timeout_ms) as deadline, driver_call():
            for condition, _index in self._reapable(now):
                if len(due) < limit:
                    # no hint: a plain range walks its index on every server
                    found = tasks.find(condition, {"_id": 1}, limit=limit - len(due))
                    due += [document["_id"] async for document in found]
            if not self._counted:
                if not due:
                    return 0
                # The filter again: a task renewed since it was found stays.
                again = [condition for condition, _ in self._reapable(now)]
                deleted = await tasks.delete_many({"_id": {"$in": due}, "$or": again}, hint="_id_")
                return deleted.deleted_count
            retention = self.options.terminal_retention_ms
            reaped = 0
            if due:
                reaped = await counters.reap_counted(
                    self._db(),
                    self._tasks_name,
                    self._counts_name,
                    due,
                    lambda d: _still_due(d, now, retention),
                )
            # the fold takes at most half of what is left of the bound
            stop_at = anyio.current_time() + (deadline - anyio.current_time()) / 2
            await counters.fold(self._db(), self._tasks_name, self._counts_name, now, stop_at)
        return reaped

    async def counts(self) -> StoreCounts:
        """Rows and unexpired tasks per status at the server's now, from the counters
        (:func:`counters.read_counts`); from :meth:`stats` where the collection has none
        (a server without transactions, a collection no handle has used since)."""
        now = await self._server_now()
        db = self._db()
        counts = await counters.read_counts(
            db[self._counts_name], db[self._tasks_name], now, self.options
        )
        return counts if counts is not None else counts_of(await self.stats())

    async def stats(self) -> StoreStats:
        """Aggregates of the namespace's tasks for ``mcp-tasks stats`` at the server's now:
        from the counters (:func:`counters.read_stats`), else (a collection without them)
        two aggregations (:func:`pipelines.stats_totals`, :func:`pipelines.stats_owners`,
        each a scan of the collection). Writes nothing: unlike every operation, it does not
        create the indexes on a handle's first use."""
        db = self._db()
        tasks = db[self._tasks_name]
        now = await self._server_now()
        counted = await counters.read_stats(db[self._counts_name], tasks, now, self.options)
        if counted is not None:
            return counted
        with driver_call():
            totals = await (await tasks.aggregate(pipelines.stats_totals(now))).to_list()
            owners = await (await tasks.aggregate(pipelines.stats_owners(now))).to_list()
        return from_counts(
            totals[0] if totals else pipelines.NO_COUNTS,
            now=now,
            owners=len(owners),
            busiest_owners=(owner["n"] for owner in owners),
            options=self.options,
        )

    async def diagnose(self) -> list[DiagnosisRow]:
        """Rows for ``mcp-tasks doctor`` (:func:`mcp_tasks_mongodb.server_checks.diagnose`)."""
        return await server_checks.diagnose(self._db, self._tasks_name)


async def _drop(connect_url: str, database: str, prefix: str, options: StoreOptions) -> None:
    """Drop the namespace's collections (only for tests and ``drop_namespace``), within
    the store's bound each call: a server that does not answer fails the drop, never
    holds it."""
    with driver_call():
        client: AsyncMongoClient[Document] = AsyncMongoClient(
            connect_url, **driver_timeouts(connect_url, options)
        )
        try:
            db = client[database]
            await db.drop_collection(f"{prefix}_tasks")
            await db.drop_collection(f"{prefix}_meta")
            await db.drop_collection(f"{prefix}_counts")
            await db.drop_collection(f"{prefix}_signals")  # the notifier's
        finally:
            await client.close()


class MongoStoreBackend(MongoTestServers):
    """Opens ``mongodb://[user:password@]host:27017/database`` (or ``mongodb+srv://``);
    the database (default ``mcp_tasks``) and ``?prefix=NAME`` (the collection prefix,
    default ``mcp_tasks``) are the namespace; ``?timeout_ms=`` is the store's bound on
    waiting (``StoreOptions.timeout_ms``); PyMongo reads every other option."""

    def locate(self, url: str, /) -> MongoLocation:
        return locate(url)

    def open(self, location: MongoLocation, options: StoreOptions, /) -> MongoTaskStore:
        return MongoTaskStore(
            location.connect_url,
            options,
            database=location.database,
            prefix=location.prefix,
            location=location,
        )

    def namespaced(self, location: MongoLocation, namespace: str, /) -> MongoLocation:
        return locate(with_query(location.url, prefix=namespace))

    async def drop(self, location: MongoLocation, /) -> None:
        await _drop(location.connect_url, location.database, location.prefix, location.options())


def from_url(url: str, options: StoreOptions | None = None) -> MongoTaskStore:
    """The store ``url`` names (see :class:`MongoStoreBackend`)."""
    location = backend.locate(url)
    return backend.open(location, location.options(options))


#: The ``mongodb`` and ``mongodb+srv`` entry points of the ``mcp_tasks.stores`` group.
backend = MongoStoreBackend()


def _still_due(document: Document, now: int, terminal_retention_ms: int) -> bool:
    """``pipelines.reapable`` on a document read again in the reap's transaction."""
    expires_at, retain_from = document["expires_at"], document.get("retain_from")
    return (expires_at is not None and expires_at <= now) or (
        retain_from is not None and retain_from <= now - terminal_retention_ms
    )


async def _fill_work_types(tasks: AsyncCollection[Document]) -> None:
    """Give each claimable task written before the ``work_type`` field (S-CLAIM.4) its work's
    type, read from its payload: once, when the index on the field is first created."""
    older = {"runnable": True, "work_type": {"$exists": False}}
    async for document in tasks.find(older, {"payload": 1}):
        payload = loads(document["payload"])
        work = payload.get("work") if isinstance(payload, dict) else None
        if isinstance(work, dict):
            await tasks.update_one(
                {"_id": document["_id"], "work_type": {"$exists": False}},
                {"$set": {"work_type": work["type"]}},
            )
