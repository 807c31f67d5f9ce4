"""The caps of ``create``: the namespace's create lock, the bound of unexpired rows it
carries, and the counts a capped create makes while it holds the lock.

``create`` checks the caps and inserts while it holds the namespace's create lock (a
document in ``<prefix>_meta`` taken with a conditional ``find_one_and_update`` on the
server's clock, held at most until the create's own deadline: the store's bound from the
create's start). The same document keeps ``bound``, an upper
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
between the two misses it. A holder that stalled past its deadline loses the lock; its
late unlock adds only its row, and the create that took the lock from it counts exactly
(the stalled holder's row may be missing from the bound). A namespace whose lock document
has no bound yet counts once.

The per-owner cap is counted at every create of an owned task, up to the cap, at once with
the id check, under the lock (a bound per owner would need a document per owner): the wait
is one round trip, as the id check's alone before the lock is for a create without it. A
handle with only that cap raises the bound too. Handles with a row cap, whatever
its value, share the one bound. Handles without any cap insert without the lock and leave
the bound alone (raising it would turn their ``hello`` into a write to the one document
every create contends for): beside capped handles on one namespace, the bound misses their
rows until the capped handles' next exact count, so those may create up to ``max_rows``
minus the bound at their last count before they count again and see them. ``INV-CAP`` is
stated for handles with the same options. No multi-document transaction is used, so a
standalone server and a replica set behave alike.
"""

from __future__ import annotations

import asyncio
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
    "check_new",
    "ensure_lock",
    "local_lock",
    "owner_room",
    "rows_bound",
    "take",
    "unlock",
]

_LOCK_ID = "create"

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
    from a holder that stalled) and the bound as stored (0 when never set)."""

    holder: str
    now: int
    bound: int | None
    stored: int


async def ensure_lock(meta: AsyncCollection[Document]) -> None:
    """Create the namespace's lock document, idempotently."""
    # DuplicateKeyError: another handle created it at the same moment.
    with suppress(DuplicateKeyError):
        await meta.update_one(
            {"_id": _LOCK_ID}, {"$setOnInsert": {"holder": None, "until": 0}}, upsert=True
        )


async def take(meta: AsyncCollection[Document], *, deadline: float) -> Lock:
    """Take the namespace's create lock, held until ``deadline`` (the caller's own, on
    ``anyio.current_time()``) and waited for until then; the bound comes with it, in the same
    round trip. Past its deadline the caller does nothing more under the lock (its driver
    calls end there), so a create that died holding it (its process killed), was
    cancelled, or whose unlock failed in an outage blocks the others no longer than it
    could have used it.

    Raises:
        StoreUnavailable: the lock stayed taken until ``deadline``, or the server failed.
    """
    holder = new_token()
    free: Document = {"$or": [{"$eq": ["$holder", None]}, {"$lte": ["$until", "$now"]}]}
    pause = 0.004
    while (left_s := deadline - anyio.current_time()) > 0:
        steps: list[Document] = [
            {"$set": {"now": pipelines.NOW, "holder": {"$ifNull": ["$holder", None]}}},
            {"$set": {"until": {"$ifNull": ["$until", 0]}}},
            {
                "$set": {
                    "holder": {"$cond": [free, {"$literal": holder}, "$holder"]},
                    "until": {
                        "$cond": [free, {"$add": ["$now", math.ceil(left_s * 1000)]}, "$until"]
                    },
                    # taken from a holder that stalled (or whose unlock failed): the bound
                    # may lack that holder's row, so the taker counts exactly.
                    "stolen": {"$cond": [free, {"$ne": ["$holder", None]}, "$stolen"]},
                }
            },
        ]
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
            )
        # Another create holds it: back off a little more each time (jittered), and try
        # again as soon as its hold ends, if that comes sooner.
        pause = min(0.2, pause * 1.5)
        wait_s = random.uniform(pause / 2, pause)  # noqa: S311 (not secrecy)
        if lock is not None:
            wait_s = min(wait_s, max(0.0, (lock["until"] - lock["now"]) / 1000))
        await asyncio.sleep(wait_s)
    raise StoreUnavailable("The namespace's create lock stayed taken")


async def unlock(meta: AsyncCollection[Document], holder: str, grow: int, written: int) -> None:
    """Free the lock and add ``grow`` to the bound, in one update. A holder that lost
    the lock (it stalled past its deadline) frees nothing and adds only its row
    (``written``)."""
    mine: Document = {"$eq": ["$holder", {"$literal": holder}]}
    with driver_call():
        await meta.update_one(
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


async def owner_room(
    tasks: AsyncCollection[Document], task: NewTask, now: int, per_owner: int | None
) -> tuple[bool, int]:
    """Whether ``task``'s id is stored, and, under a per-owner cap, its owner's active tasks
    (:func:`~mcp_tasks_mongodb.pipelines.active`) counted up to the cap (else 0); both
    requests at once (the caller holds the create lock, so neither can change meanwhile).
    Counted every time: a bound per owner would need a document per owner."""
    if per_owner is None:
        return False, 0
    with driver_call():
        found, mine = await asyncio.gather(
            tasks.find_one({"_id": task.task_id}, {"_id": 1}),
            tasks.count_documents(
                pipelines.active(task.owner, now), limit=per_owner, hint="owner_active"
            ),
        )
    return found is not None, mine
