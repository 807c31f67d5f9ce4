"""The counts the MongoDB store keeps as it writes (``counts()``, the store gauges, and the
figures of ``stats()`` that do not move with the clock alone), without a write of two
documents on any request path.

Every write of a task marks its document ``dirty`` in the same single-document update (an
insert, a compare-and-set, a claim, a renewal). A document's ``f`` is what it counted as when
it was last *folded* into the counters (:func:`counted_as`: its status, owner, expiry
minute, whether a claim may take it, its creation minute); a document without ``f`` counts
nowhere yet. The counters are documents of ``<prefix>_counts``:

* ``totals``: ``rows``, ``status.<status>``, ``runnable`` (tasks a claim may take), ``hist``
  (how many owners have each count of active tasks: ``hist.<n>``) and ``g``, the fold
  generation every fold and reap increments;
* ``o:<owner>``: the owner's active tasks (``rules.is_active`` less the expiry: taken away at
  the read);
* ``e:<minute>``: the tasks expiring in that minute (``expires_at // MINUTE_MS``);
* ``w:<minute>``: the ``working`` tasks created in that minute (the oldest working task).

A *fold* (:func:`fold`, run by ``reap``) moves what the dirty documents changed into the
counters: in one transaction per batch it reads the batch, adds ``counted_as(now) -
f`` of each document to the counters, sets its ``f`` and clears ``dirty``, each document's
clear conditioned on its write version ``v`` (a write that comes between makes the
transaction conflict and run again). A reap deletes its rows in a transaction that takes
their ``f`` away. Only folds and reaps write the counters: the request paths never wait
for one another there, and a transaction waits only for another fold or reap.

A read (:func:`read_counts`, :func:`read_stats`) is the counters, plus what each dirty
document changed (``counted_as - f``: the documents written since the last fold, an index
walk of ``dirty``), less the rows past their TTL the reaper has not deleted yet (an index
range of ``expires_at``), with the fold generation read before and after (a fold in between:
read again). Its cost is those sets' and the few indexed sets that move with the clock, not
the collection's.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import anyio
from pymongo import DeleteMany, UpdateOne

from mcp_tasks.domain.errors import StoreUnavailable
from mcp_tasks.domain.rules import EXPIRY_HORIZON_MS, UNCLAIMED_AFTER_MS
from mcp_tasks.domain.states import LIVE, TaskStatus
from mcp_tasks.stores.stats import StoreCounts, StoreStats, busiest
from mcp_tasks_mongodb.driver import driver_call
from mcp_tasks_mongodb.pipelines import LOWEST, at_most

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from pymongo.asynchronous.client_session import AsyncClientSession
    from pymongo.asynchronous.collection import AsyncCollection
    from pymongo.asynchronous.database import AsyncDatabase

    from mcp_tasks.domain.models import StoreOptions
    from mcp_tasks_mongodb.codec import Document

__all__ = [
    "MINUTE_MS",
    "TOTALS",
    "Delta",
    "counted_as",
    "ensure_counters",
    "fold",
    "read_counts",
    "read_stats",
    "reap_counted",
]

#: The width of an expiry or creation minute counter.
MINUTE_MS: Final = 60_000
#: The ``_id`` of the totals document.
TOTALS: Final = "totals"
#: Dirty documents folded per transaction.
BATCH: Final = 200
#: Reads begun again at most when folds keep coming between their two looks at ``g``.
READ_TRIES: Final = 20

_LIVE = frozenset(status.value for status in LIVE)
_WORKING = TaskStatus.WORKING.value
#: The fields a fold and a read need of a task document.
FIELDS: Final = {
    "status": 1,
    "owner": 1,
    "expires_at": 1,
    "runnable": 1,
    "created_at": 1,
    "f": 1,
    "v": 1,
}
#: Beside :data:`FIELDS`, what the figures that move with the clock read.
CLOCK_FIELDS: Final = {**FIELDS, "claim_expires_at": 1, "retry_at": 1}


def _minute(moment: int | None) -> int | None:
    return None if moment is None else moment // MINUTE_MS


def counted_as(document: Mapping[str, Any]) -> Document:
    """What a task document counts as in the counters (its ``f`` once folded)."""
    return {
        "s": document["status"],
        "o": document["owner"],
        "e": _minute(document["expires_at"]),
        "r": bool(document["runnable"]),
        "c": document["created_at"] // MINUTE_MS,
    }


def _key(prefix: str, minute: int) -> str:
    return f"{prefix}:{minute:016d}"


@dataclass
class Delta:
    """Changes to the counters."""

    rows: int = 0
    status: Counter[str] = field(default_factory=Counter)
    runnable: int = 0
    owners: Counter[str] = field(default_factory=Counter)
    expiry: Counter[int] = field(default_factory=Counter)
    working: Counter[int] = field(default_factory=Counter)

    def add(self, counted: Mapping[str, Any] | None, sign: int) -> None:
        """Count ``counted`` (a :func:`counted_as`) ``sign`` times (``None``: nothing)."""
        if counted is None:
            return
        self.rows += sign
        self.status[counted["s"]] += sign
        self.runnable += sign * bool(counted["r"])
        if counted["o"] is not None and counted["s"] in _LIVE:
            self.owners[counted["o"]] += sign
        if counted["e"] is not None:
            self.expiry[counted["e"]] += sign
        if counted["s"] == _WORKING:
            self.working[counted["c"]] += sign

    def changes(self, document: Mapping[str, Any]) -> None:
        """What a dirty document changed since it was folded."""
        self.add(document.get("f"), -1)
        self.add(counted_as(document), 1)

    def writes(self, owners_before: Mapping[str, int]) -> list[Any]:
        """The counter writes (one transaction's): ``owners_before`` are the owners'
        counters as the transaction read them."""
        inc: dict[str, int] = {"g": 1}
        if self.rows:
            inc["rows"] = self.rows
        if self.runnable:
            inc["runnable"] = self.runnable
        for status, n in self.status.items():
            if n:
                inc[f"status.{status}"] = n
        hist: Counter[int] = Counter()
        touched: list[str] = []
        writes: list[Any] = []
        for owner, n in self.owners.items():
            if not n:
                continue
            before = owners_before.get(owner, 0)
            hist[before] -= 1
            hist[before + n] += 1
            key = "o:" + owner
            touched.append(key)
            writes.append(UpdateOne({"_id": key}, {"$inc": {"n": n}}, upsert=True))
        for count, n in hist.items():
            if count > 0 and n:
                inc[f"hist.{count}"] = n
        for prefix, minutes in (("e", self.expiry), ("w", self.working)):
            for minute, n in minutes.items():
                if n:
                    key = _key(prefix, minute)
                    touched.append(key)
                    writes.append(UpdateOne({"_id": key}, {"$inc": {"n": n}}, upsert=True))
        writes.insert(0, UpdateOne({"_id": TOTALS}, {"$inc": inc}))
        if touched:
            writes.append(DeleteMany({"_id": {"$in": touched}, "n": 0}))
        return writes


async def _owners_of(
    counts: AsyncCollection[Document],
    owners: Iterable[str],
    session: AsyncClientSession | None = None,
) -> dict[str, int]:
    keys = ["o:" + owner for owner in owners]
    if not keys:
        return {}
    found = counts.find({"_id": {"$in": keys}}, session=session)
    return {document["_id"][2:]: document["n"] async for document in found}


async def ensure_counters(
    tasks: AsyncCollection[Document], counts: AsyncCollection[Document]
) -> bool:
    """Make the counters of a collection that has none (``migrate``, a handle's first use;
    or an operator dropped them to have them made again): every document marked dirty and
    counted nowhere (no ``f``), then an empty totals document, so that from the moment the
    totals exist every document counts once, by the next fold. Whether they were made."""
    if await counts.find_one({"_id": TOTALS}, {"_id": 1}) is not None:
        return False
    await tasks.update_many({}, {"$set": {"dirty": True}, "$unset": {"f": ""}})
    empty = {"_id": TOTALS, "g": 0, "rows": 0, "runnable": 0, "status": {}, "hist": {}}
    await counts.update_one({"_id": TOTALS}, {"$setOnInsert": empty}, upsert=True)
    return True


async def fold(
    db: AsyncDatabase[Document], tasks_name: str, counts_name: str, now: int, stop_at: float
) -> int:
    """Fold the documents dirty now into the counters, :data:`BATCH` per transaction, until
    ``stop_at`` (``anyio.current_time()``; the next fold goes on where this one stopped),
    except those past their TTL at ``now`` (the next reap deletes them: a read counts a
    dirty document as well as a folded one); how many were folded."""
    tasks, counts = db[tasks_name], db[counts_name]
    with driver_call():
        found = tasks.find({"dirty": True}, {"expires_at": 1})
        dirty = [d["_id"] async for d in found if _unexpired(d, now)]
    folded = 0
    for start in range(0, len(dirty), BATCH):
        if anyio.current_time() >= stop_at:
            break
        ids = dirty[start : start + BATCH]

        async def one(session: AsyncClientSession, ids: list[str] = ids) -> int:
            found = tasks.find({"_id": {"$in": ids}, "dirty": True}, FIELDS, session=session)
            documents = [d async for d in found]
            delta = Delta()
            for document in documents:
                delta.changes(document)
            before = await _owners_of(counts, delta.owners, session)
            if documents:
                await tasks.bulk_write(
                    [
                        UpdateOne(
                            {"_id": d["_id"], "v": d["v"]},
                            {"$set": {"f": counted_as(d)}, "$unset": {"dirty": ""}},
                        )
                        for d in documents
                    ],
                    ordered=False,
                    session=session,
                )
                await counts.bulk_write(delta.writes(before), ordered=True, session=session)
            return len(documents)

        with driver_call():
            async with db.client.start_session() as session:
                folded += await session.with_transaction(one)
    return folded


async def reap_counted(
    db: AsyncDatabase[Document],
    tasks_name: str,
    counts_name: str,
    due: list[str],
    still_due: Any,
) -> int:
    """Delete the tasks of ``due`` that ``still_due(document)`` says are still reapable, and
    take what they counted as (``f``) from the counters, in one transaction."""
    tasks, counts = db[tasks_name], db[counts_name]

    async def one(session: AsyncClientSession) -> int:
        fields = {**CLOCK_FIELDS, "retain_from": 1}
        found = tasks.find({"_id": {"$in": due}}, fields, session=session)
        documents = [d async for d in found if still_due(d)]
        if not documents:
            return 0
        delta = Delta()
        for document in documents:
            delta.add(document.get("f"), -1)
        before = await _owners_of(counts, delta.owners, session)
        deleted = await tasks.delete_many(
            {"_id": {"$in": [d["_id"] for d in documents]}}, session=session
        )
        await counts.bulk_write(delta.writes(before), ordered=True, session=session)
        return deleted.deleted_count

    with driver_call():
        async with db.client.start_session() as session:
            return await session.with_transaction(one)


# --- reads ---------------------------------------------------------------------------


@dataclass
class _Read:
    """One consistent read: the totals, the dirty documents, the rows past their TTL."""

    totals: Document
    dirty: list[Document]
    expired: list[Document]
    extra: dict[str, Any]


async def _consistent(
    counts: AsyncCollection[Document],
    tasks: AsyncCollection[Document],
    now: int,
    fields: Document,
    more: Any = None,
) -> _Read | None:
    """The totals, the dirty documents and the rows past their TTL at ``now`` (and what
    ``more(totals)`` reads), with no fold or reap between the first look at the totals and
    the last; ``None`` when the collection has no counters."""
    for _ in range(READ_TRIES):
        totals = await counts.find_one({"_id": TOTALS})
        if totals is None:
            return None
        dirty_found, expired_found = await asyncio.gather(
            tasks.find({"dirty": True}, fields).to_list(),
            tasks.find({"expires_at": at_most(now)}, fields).to_list(),
        )
        extra = await more(totals, dirty_found, expired_found) if more is not None else {}
        again = await counts.find_one({"_id": TOTALS}, {"g": 1})
        if again is not None and again["g"] == totals["g"]:
            return _Read(totals, dirty_found, expired_found, extra)
    raise StoreUnavailable(f"The counters kept changing while they were read ({READ_TRIES} tries)")


def _statuses(read: _Read) -> tuple[int, dict[TaskStatus, int], Delta]:
    """Rows and unexpired tasks per status; the delta of the dirty documents."""
    delta = Delta()
    for document in read.dirty:
        delta.changes(document)
    expired = Delta()
    for document in read.expired:
        expired.add(counted_as(document), 1)
    kept = read.totals.get("status", {})
    by_status = {
        status: int(kept.get(status.value, 0))
        + delta.status[status.value]
        - expired.status[status.value]
        for status in TaskStatus
    }
    return int(read.totals["rows"]) + delta.rows, by_status, delta


async def read_counts(
    counts: AsyncCollection[Document],
    tasks: AsyncCollection[Document],
    now: int,
    options: StoreOptions,
) -> StoreCounts | None:
    """``counts()`` at ``now``: ``None`` when the collection has no counters yet."""
    with driver_call():
        read = await _consistent(counts, tasks, now, FIELDS)
    if read is None:
        return None
    rows, by_status, _ = _statuses(read)
    return StoreCounts(now=now, rows=rows, by_status=by_status, max_rows=options.max_rows)


def _unexpired(document: Mapping[str, Any], now: int) -> bool:
    expires_at = document["expires_at"]
    return expires_at is None or expires_at > now


async def read_stats(
    counts: AsyncCollection[Document],
    tasks: AsyncCollection[Document],
    now: int,
    options: StoreOptions,
) -> StoreStats | None:
    """``stats()`` at ``now`` from the counters (``None``: the collection has none yet).
    What moves with the clock alone is read from the few documents it concerns, each set
    by an index: the leases and retries of the active tasks (``leases``, ``retries``, a
    range per status), the claimable tasks created within the unclaimed threshold
    (``claim_order``), the rows of the horizon's last minute expiring beyond it
    (``expiry``), the working tasks of the oldest minute that has one (``working_age``)."""
    before = now - UNCLAIMED_AFTER_MS
    horizon_end = now + EXPIRY_HORIZON_MS
    first, last = now // MINUTE_MS, horizon_end // MINUTE_MS

    async def more(
        totals: Document, dirty: list[Document], expired: list[Document]
    ) -> dict[str, Any]:
        affected = {d["owner"] for d in (*dirty, *expired) if d["owner"] is not None}
        affected |= {d["f"]["o"] for d in dirty if d.get("f") and d["f"]["o"] is not None}

        def find(query: Document) -> Any:
            return tasks.find(query, CLOCK_FIELDS).to_list()

        def of_live(name: str, condition: Document) -> list[Any]:
            # one plain range of the index (status, name) per live status
            return [find({"status": status, name: condition}) for status in sorted(_LIVE)]

        ever = {"$gte": LOWEST}  # every number: a range that leaves out null
        clocked = await asyncio.gather(
            *of_live("claim_expires_at", {"$gt": now}),
            *of_live("claim_expires_at", at_most(now)),
            *of_live("retry_at", ever),
        )
        live = len(_LIVE)
        leased = [d for found in clocked[:live] for d in found]
        due = [d for found in clocked[live : 2 * live] for d in found]
        retrying = [d for found in clocked[2 * live :] for d in found]
        owners, ready, waiting, beyond, minutes, working = await asyncio.gather(
            _owners_of(counts, affected),
            find({"lane": "ready", "created_at": {"$gt": before}}),
            find({"lane": "waiting", "created_at": {"$gt": before}}),
            tasks.find(
                {"expires_at": {"$gt": horizon_end, "$lt": (last + 1) * MINUTE_MS}}, {"_id": 1}
            ).to_list(),
            counts.find({"_id": {"$gte": _key("e", first), "$lte": _key("e", last)}}).to_list(),
            counts.find({"_id": {"$gte": "w:", "$lt": "w;"}}).to_list(),
        )
        return {
            "owners": owners,
            "leased": leased,
            "lapsed": due,
            "retrying": retrying,
            "recent": [*ready, *waiting],
            "beyond": len(beyond),
            "expiry": sum(int(m["n"]) for m in minutes),
            "working": {int(m["_id"][2:]): int(m["n"]) for m in working},
        }

    with driver_call():
        read = await _consistent(counts, tasks, now, CLOCK_FIELDS, more)
        if read is None:
            return None
        rows, by_status, delta = _statuses(read)
        extra = read.extra
        oldest = await _oldest_working(tasks, read, delta, extra["working"], now)
    expired = [counted_as(d) for d in read.expired]

    def claimable(document: Mapping[str, Any]) -> bool:
        retry_at, ends = document["retry_at"], document["claim_expires_at"]
        return (
            bool(document["runnable"])
            and (retry_at is None or retry_at <= now)
            and _unexpired(document, now)
            and (ends is None or ends <= now)
        )

    def active(document: Mapping[str, Any]) -> bool:
        return document["status"] in _LIVE and _unexpired(document, now)

    leased: dict[str, Document] = {d["_id"]: d for d in extra["leased"]}
    lapsed = {d["_id"]: d for d in extra["lapsed"]}
    retrying = {d["_id"]: d for d in extra["retrying"]}
    claimed = sum(1 for d in leased.values() if active(d))
    lease_lapsed = sum(1 for d in lapsed.values() if claimable(d))
    retry_due = sum(1 for d in retrying.values() if d["retry_at"] <= now and claimable(d))
    retry_pending = sum(1 for d in retrying.values() if d["retry_at"] > now and active(d))
    # rules.waits_unclaimed: every runnable task the counters hold, less the expired ones,
    # those created within the threshold, and the older ones a live lease or a retry not
    # due yet holds
    runnable = (
        int(read.totals.get("runnable", 0)) + delta.runnable - sum(1 for c in expired if c["r"])
    )
    recent = sum(1 for d in extra["recent"] if d["runnable"] and _unexpired(d, now))
    held = {
        d["_id"]
        for d in (*leased.values(), *retrying.values())
        if d["runnable"] and _unexpired(d, now) and d["created_at"] <= before and not claimable(d)
    }
    waiting_unclaimed = runnable - recent - len(held)
    # rules.expires_within: the minutes from now's to the horizon's, less the rows of now's
    # minute already past their TTL and those of the horizon's minute beyond it
    soon = (
        extra["expiry"]
        + sum(n for minute, n in delta.expiry.items() if first <= minute <= last)
        - sum(1 for d in read.expired if d["expires_at"] >= first * MINUTE_MS)
        - extra["beyond"]
    )
    # the owners: their histogram, each owner a dirty or an expired document concerns
    # moved to its count now
    hist: Counter[int] = Counter({int(k): int(v) for k, v in read.totals.get("hist", {}).items()})
    lapsed_of: Counter[str] = Counter(
        c["o"] for c in expired if c["o"] is not None and c["s"] in _LIVE
    )
    for owner in set(delta.owners) | set(lapsed_of):
        kept = extra["owners"].get(owner, 0)
        now_n = kept + delta.owners[owner] - lapsed_of[owner]
        if kept > 0:
            hist[kept] -= 1
        if now_n > 0:
            hist[now_n] += 1
    per_owner = [count for count, n in hist.items() if count > 0 for _ in range(max(n, 0))]
    return StoreStats(
        now=now,
        rows=rows,
        by_status=by_status,
        claimed=claimed,
        lease_lapsed=lease_lapsed,
        retry_due=retry_due,
        retry_pending=retry_pending,
        oldest_working_created_at=oldest,
        expiring_soon=soon,
        waiting_unclaimed=waiting_unclaimed,
        owners=len(per_owner),
        busiest_owners=busiest(per_owner),
        max_rows=options.max_rows,
        max_active_per_owner=options.max_active_per_owner,
    )


async def _oldest_working(
    tasks: AsyncCollection[Document],
    read: _Read,
    delta: Delta,
    kept: dict[int, int],
    now: int,
) -> int | None:
    """``created_at`` of the oldest unexpired working task: the minutes that have working
    tasks (their counters, the dirty documents' changes, less the expired ones), oldest
    first, each searched by the ``working_age`` index for its first second that has one
    (:func:`_first_second`) and that second's tasks read, until one is unexpired: a minute
    of many working tasks costs a few index probes and one second's tasks."""
    minutes = Counter(kept)
    minutes.update(delta.working)
    for document in read.expired:
        if document["status"] == _WORKING:
            minutes[document["created_at"] // MINUTE_MS] -= 1
    for minute in sorted(m for m, n in minutes.items() if n > 0):
        start, end = minute * MINUTE_MS, (minute + 1) * MINUTE_MS
        while (second := await _first_second(tasks, start, end)) is not None:
            window = {"$gte": second, "$lt": min(second + 1_000, end)}
            found = await tasks.find(
                {"status": _WORKING, "created_at": window}, {"created_at": 1, "expires_at": 1}
            ).to_list()
            alive = [d["created_at"] for d in found if _unexpired(d, now)]
            if alive:
                return int(min(alive))
            start = second + 1_000  # every working task of that second has expired
    return None


async def _first_second(tasks: AsyncCollection[Document], start: int, end: int) -> int | None:
    """The start of the first second from ``start`` (before ``end``) with a working task:
    windows from ``start`` twice as wide each time until one has a task (one document's
    ``_id`` read), then halved down to a second."""

    async def has_one(low: int, high: int) -> bool:
        found = {"status": _WORKING, "created_at": {"$gte": low, "$lt": high}}
        return await tasks.find_one(found, {"_id": 1}) is not None

    width = 1_000
    while start < end:
        high = min(start + width, end)
        if await has_one(start, high):
            while high - start > 1_000:
                middle = start + max((high - start) // 2_000 * 1_000, 1_000)
                if await has_one(start, middle):
                    high = middle
                else:
                    start = middle
            return start
        start, width = high, width * 2
    return None
