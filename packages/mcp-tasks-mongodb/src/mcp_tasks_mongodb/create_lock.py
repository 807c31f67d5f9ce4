"""The caps of ``create``: the namespace's create lock, the bound of unexpired rows it
carries, and the counts a capped create makes while it holds the lock.

``create`` checks the caps and inserts while it holds the namespace's create lock (a
document in ``<prefix>_meta`` taken with a conditional ``find_one_and_update`` on the
server's clock, held for at most half of what is left of the create's own bound, so that a
create that comes after one that died holding it keeps half of its own; the holder's calls
under the lock end there). The same document keeps ``bound``, an upper
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
unknown way raises it too).

``update``, ``cancel`` and ``put_status`` decide at their read's now, so one that reads a
task just before it expires and writes just after may keep it unexpired; an exact count
between the two misses it. A holder that stalled past its hold loses the lock; its
late unlock adds only its row, and the create that took the lock from it counts exactly
(the stalled holder's row may be missing from the bound). A namespace whose lock document
has no bound yet counts once.

The per-owner cap works the same way, on a document per owner beside the lock's
(``owner:<hash of the owner>``): ``bound``, an upper bound of that owner's active tasks,
and ``epoch``, the lock's epoch when a create last counted them. The lock's epoch goes up
each time the lock is taken from a stalled holder, so that every owner's bound is then
distrusted (the stalled holder may have inserted for any owner) until a create counts
that owner's tasks again. A create of an owned task under the per-owner cap reads the
owner's document at once with the id check (one round trip's wait); while the bound is
trusted and below the cap it inserts without counting, otherwise it counts the owner's
active tasks exactly (up to the cap). Beside its insert, before the unlock, it raises the
owner's bound by its row, and after a count sets it to that count plus the row (as an
increment of what it read, so that a stalled holder's late raise is kept). Any create of
an owned task under the lock raises its owner's bound, whatever the handle's caps (a
handle with only a row cap too): an owner's active tasks only ever come from creates.
A refused create leaves the bound alone (a count at one handle's cap may be below what a
handle with a larger cap would count). A stalled holder's late unlock raises its owner's
bound by its row as it raises the rows' bound. Handles with only a per-owner cap raise
the rows' bound too. Handles with a row cap, whatever its value, share the one bound.
Handles without any cap insert without the lock and leave the bounds alone (raising them
would turn their ``hello`` into a write to the one document every create contends for):
beside capped handles on one namespace, the bounds miss their rows until the capped
handles' next exact count, so those may create up to ``max_rows`` minus the bound at their
last count before they count again and see them. ``INV-CAP`` is
stated for handles with the same options. No multi-document transaction is used, so a
standalone server and a replica set behave alike.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import random
import weakref
from contextlib import suppress
from typing import TYPE_CHECKING, NamedTuple

import anyio
from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError

from mcp_tasks.domain.errors import DuplicateTaskId, StoreUnavailable
from mcp_tasks.domain.ids import new_token
from mcp_tasks_mongodb import pipelines
from mcp_tasks_mongodb.driver import driver_call

if TYPE_CHECKING:
    from pymongo.asynchronous.collection import AsyncCollection

    from mcp_tasks.domain.models import NewTask
    from mcp_tasks_mongodb.codec import Document

__all__ = [
    "Lock",
    "OwnerRoom",
    "check_new",
    "ensure_lock",
    "local_lock",
    "owner_key",
    "owner_room",
    "raise_owner_bound",
    "rows_bound",
    "take",
    "unlock",
]

_LOCK_ID = "create"

#: The share of what is left of a create's bound for which it holds the lock once taken.
HOLD_SHARE = 0.5

#: Per event loop, kind and namespace: in-process queues (creates before the server's create
#: lock, claims without an id).
_LOCAL_LOCKS: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str, ...], asyncio.Lock]
]
_LOCAL_LOCKS = weakref.WeakKeyDictionary()


def local_lock(*namespace: str) -> asyncio.Lock:
    """The in-process queue of ``namespace`` (a kind and the namespace's names) on the
    running event loop."""
    locks = _LOCAL_LOCKS.setdefault(asyncio.get_running_loop(), {})
    return locks.setdefault(namespace, asyncio.Lock())


class Lock(NamedTuple):
    """The create lock as taken: its holder token, the server's now, the bound of the
    unexpired rows (``None`` when it cannot be trusted: never set, or the lock was taken
    from a holder that stalled), the bound as stored (0 when never set), the epoch the
    owners' bounds are trusted in, and when the hold ends (``anyio.current_time()``, no
    later than the server's ``until``): the holder's calls under the lock must end by then
    (:meth:`held_s`)."""

    holder: str
    now: int
    bound: int | None
    stored: int
    epoch: int
    ends: float

    def held_s(self) -> float:
        """What is left of the hold, for ``pymongo.timeout`` around the calls under the
        lock (never 0, which would mean no deadline to PyMongo)."""
        return max(0.001, self.ends - anyio.current_time())


async def ensure_lock(meta: AsyncCollection[Document]) -> None:
    """Create the namespace's lock document, idempotently."""
    # DuplicateKeyError: another handle created it at the same moment.
    with suppress(DuplicateKeyError):
        await meta.update_one(
            {"_id": _LOCK_ID}, {"$setOnInsert": {"holder": None, "until": 0}}, upsert=True
        )


async def take(meta: AsyncCollection[Document], *, deadline: float) -> Lock:
    """Take the namespace's create lock, waited for until ``deadline`` (the caller's own,
    on ``anyio.current_time()``) and held for half of what is then left of it
    (:data:`HOLD_SHARE`); the bound comes with it, in the same round trip. Past the hold's
    end (``Lock.ends``) the caller does nothing more under the lock (its driver calls end
    there), so a create that died holding it (its process killed), was cancelled, or whose
    unlock failed in an outage blocks the others for at most half of its bound: a create
    retried at once elsewhere still has half of its own.

    Raises:
        StoreUnavailable: the lock stayed taken until ``deadline``, or the server failed.
    """
    holder = new_token()
    free: Document = {"$or": [{"$eq": ["$holder", None]}, {"$lte": ["$until", "$now"]}]}
    pause = 0.004
    while (left_s := deadline - anyio.current_time()) > 0:
        hold_s = left_s * HOLD_SHARE
        steps: list[Document] = [
            {"$set": {"now": pipelines.NOW, "holder": {"$ifNull": ["$holder", None]}}},
            {"$set": {"until": {"$ifNull": ["$until", 0]}}},
            {
                "$set": {
                    "holder": {"$cond": [free, {"$literal": holder}, "$holder"]},
                    "until": {
                        "$cond": [free, {"$add": ["$now", math.ceil(hold_s * 1000)]}, "$until"]
                    },
                    # taken from a holder that stalled (or whose unlock failed): the bound
                    # may lack that holder's row, so the taker counts exactly.
                    "stolen": {"$cond": [free, {"$ne": ["$holder", None]}, "$stolen"]},
                    # and every owner's bound, which the stalled holder may lack a row of
                    "epoch": {
                        "$add": [
                            {"$ifNull": ["$epoch", 0]},
                            {"$cond": [{"$and": [free, {"$ne": ["$holder", None]}]}, 1, 0]},
                        ]
                    },
                }
            },
        ]
        # The hold ends here by this process's clock, before the server's ``until`` (the
        # server reads its now after the request left).
        ends = anyio.current_time() + hold_s
        with driver_call():
            try:
                lock = await meta.find_one_and_update(
                    {"_id": _LOCK_ID}, steps, upsert=True, return_document=ReturnDocument.AFTER
                )
            except DuplicateKeyError:
                lock = None  # two first upserts met: the loser tries again
        if lock is not None and lock["holder"] == holder:
            bound = lock.get("bound")
            return Lock(
                holder,
                int(lock["now"]),
                None if bound is None or lock["stolen"] else int(bound),
                0 if bound is None else int(bound),
                int(lock["epoch"]),
                ends,
            )
        # Another create holds it: back off a little more each time (jittered), and try
        # again as soon as its hold ends, if that comes sooner.
        pause = min(0.2, pause * 1.5)
        wait_s = random.uniform(pause / 2, pause)  # noqa: S311 (not secrecy)
        if lock is not None:
            wait_s = min(wait_s, max(0.0, (lock["until"] - lock["now"]) / 1000))
        await asyncio.sleep(wait_s)
    raise StoreUnavailable("The namespace's create lock stayed taken")


async def unlock(
    meta: AsyncCollection[Document],
    holder: str,
    grow: int,
    written: int,
    *,
    owner: str | None,
    distrust: bool = False,
) -> None:
    """Free the lock and add ``grow`` to the bound, in one update; with ``distrust`` (an
    owner's bound may lack the row: its raise failed) a new epoch, so that every owner's
    bound is counted again. A holder that lost the lock (it stalled past its hold)
    frees nothing and adds only its row (``written``), to the rows' bound and to its
    owner's."""
    mine: Document = {"$eq": ["$holder", {"$literal": holder}]}
    with driver_call():
        before = await meta.find_one_and_update(
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
                        "epoch": {"$add": [{"$ifNull": ["$epoch", 0]}, int(distrust)]},
                    }
                }
            ],
            projection={"holder": 1},
        )
    if (before is None or before.get("holder") != holder) and written and owner is not None:
        await raise_owner_bound(meta, owner, written)


async def rows_bound(tasks: AsyncCollection[Document], lock: Lock, cap: int | None) -> int:
    """An upper bound of the unexpired rows before this create (the caller holds the
    create lock): the lock's bound while it is trusted and below the row cap ``cap``, else
    an exact count (:func:`~mcp_tasks_mongodb.pipelines.unexpired`; capped at the row cap
    when the bound is trusted: at the cap, the larger of the two, so that the bound never
    drops below a handle's larger cap)."""
    if cap is None:
        return lock.stored  # nothing to check: the bound only grows by the row
    if lock.bound is not None and lock.bound < cap:
        return lock.bound
    unexpired = pipelines.unexpired(lock.now)
    with driver_call():
        if lock.bound is None:  # unknown: count every row, the bound is then exact
            return await tasks.count_documents(unexpired, hint="expiry")
        rows = await tasks.count_documents(unexpired, limit=cap, hint="expiry")
    return rows if rows < cap else max(rows, lock.bound)


async def check_new(tasks: AsyncCollection[Document], task_id: str) -> None:
    """DuplicateTaskId when ``task_id`` is stored (expired or not)."""
    with driver_call():
        if await tasks.find_one({"_id": task_id}, {"_id": 1}) is not None:
            raise DuplicateTaskId


class OwnerRoom(NamedTuple):
    """What a create under the per-owner cap learnt with the lock held: whether its id is
    stored, the owner's active tasks (exact, or an upper bound), and, after an exact count
    below the cap, what the owner's stored bound is off by (else ``None``)."""

    exists: bool
    active: int
    off_by: int | None


def owner_key(owner: str) -> str:
    """The ``_id`` of an owner's bound: a hash, so any owner string fits (and is not
    spelled out in a key)."""
    return "owner:" + hashlib.sha256(owner.encode()).hexdigest()[:32]


async def owner_room(
    tasks: AsyncCollection[Document],
    meta: AsyncCollection[Document],
    task: NewTask,
    lock: Lock,
    per_owner: int,
) -> OwnerRoom:
    """Whether ``task``'s id is stored, and its owner's active tasks: the owner's bound
    while it is trusted (set in the lock's epoch) and below the cap ``per_owner``, else
    counted exactly up to the cap (:func:`~mcp_tasks_mongodb.pipelines.active`). The id
    check and the bound's read go at once (the caller holds the create lock, so neither
    can change meanwhile)."""
    assert task.owner is not None  # an ownerless task is held to the row cap alone
    with driver_call():
        found, owned = await asyncio.gather(
            tasks.find_one({"_id": task.task_id}, {"_id": 1}),
            meta.find_one({"_id": owner_key(task.owner)}),
        )
    if found is not None:
        return OwnerRoom(exists=True, active=0, off_by=None)
    stored = 0 if owned is None else int(owned["bound"])
    if owned is not None and owned.get("epoch") == lock.epoch and stored < per_owner:
        return OwnerRoom(exists=False, active=stored, off_by=None)
    with driver_call():
        active = await tasks.count_documents(
            pipelines.active(task.owner, lock.now), limit=per_owner, hint="owner_active"
        )
    # At the cap the count may be below what a handle with a larger cap would count:
    # the stored bound stays as it is.
    return OwnerRoom(
        exists=False, active=active, off_by=active - stored if active < per_owner else None
    )


async def raise_owner_bound(
    meta: AsyncCollection[Document], owner: str, grow: int, epoch: int | None = None
) -> None:
    """Add ``grow`` to ``owner``'s bound; with ``epoch`` (after an exact count), trust it
    in that epoch from now on."""
    update: Document = {"$inc": {"bound": grow}}
    if epoch is not None:
        update["$set"] = {"epoch": epoch}
    with driver_call():
        try:
            await meta.update_one({"_id": owner_key(owner)}, update, upsert=True)
        except DuplicateKeyError:  # a stalled holder's late raise made it meanwhile
            await meta.update_one({"_id": owner_key(owner)}, update)
