"""The rules of :mod:`mcp_tasks.domain.rules` the MongoDB store restates on the server, one
named piece per rule, each checked against its rule on random documents on a real server
(``tests/test_mongodb_pipelines.py``).

Everything else the store decides in Python with the rules themselves (``create``, ``get``,
``update``, ``cancel``, ``put_status``: read, compute, compare-and-set). These pieces are
what a single update or query must decide where the document is:

========================  =====================================================
piece                     the rule it restates
========================  =====================================================
:func:`claimable`         ``rules.claimable`` (the claim's guard)
:func:`claim`             ``rules.apply_claim``
:func:`renew`             ``rules.apply_renew``
:func:`release`           ``rules.apply_release``
:func:`held_until`        ``rules.held_until`` (the TTL hold of a lease)
:func:`claim_lane`        ``rules.claim_lane`` (the lanes a claim walks)
:func:`due`               ``rules.claim_lane``'s waiting place come (the lane moves)
:func:`claim_order`       ``rules.claim_order`` (the ready lane's sort, a page on)
:func:`unexpired`         ``rules.counts_toward_cap`` (the row cap's count)
:func:`active`            ``rules.is_active`` (the per-owner cap's count)
:func:`reapable`          ``rules.is_reapable``
:func:`counted`           ``stats``' rules: ``rules.counts_toward_cap`` per
                          status, ``is_claimed``, ``lease_lapsed``,
                          ``retry_due``, ``retry_pending``, ``expires_within``
========================  =====================================================

``now`` is an aggregation expression of the server's now in epoch ms (:data:`NOW`, which
every update and the store's own reads use) or, in a query filter, the number the store
read from the server's clock (``hello``); the checks pass a number of their own choosing
(on the edges: a claim, a TTL or a retry at ``now``, one millisecond before, one after),
and only that leaf differs from what the store sends.

A guarded write (:func:`claim`, :func:`renew`) is an update by ``_id`` whose pipeline
decides the guard once, at the update's now, and applies its stages only where it holds:
elsewhere every field keeps its value, the version (``v``) too, which is how the store
sees that nothing was written. A query filter with ``$expr`` may not use an index on
every server; a guard in the pipeline of an update by ``_id`` always does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from mcp_tasks.domain.rules import EXPIRY_HORIZON_MS, UNCLAIMED_AFTER_MS
from mcp_tasks.domain.states import Event, TaskStatus, next_status
from mcp_tasks.stores.stats import COUNTED

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mcp_tasks.domain.models import Lease
    from mcp_tasks_mongodb.codec import Document

__all__ = [
    "CLAIMABLE",
    "LIVE",
    "NOW",
    "NO_COUNTS",
    "RENEWABLE",
    "active",
    "claim",
    "claim_lane",
    "claim_order",
    "claimable",
    "counted",
    "due",
    "held_until",
    "promoted",
    "reapable",
    "release",
    "renew",
    "stats_owners",
    "stats_totals",
    "unexpired",
]

#: The server's now in epoch ms, as an aggregation expression.
NOW: Final[Document] = {"$toLong": "$$NOW"}

#: Statuses the status machine lets a claim take, a renew keep, and the live ones.
CLAIMABLE: Final = [s.value for s in TaskStatus if next_status(s, Event.CLAIM) is not None]
RENEWABLE: Final = [s.value for s in TaskStatus if next_status(s, Event.RENEW) is not None]
LIVE: Final = [s.value for s in TaskStatus if not s.is_terminal]


#: Below every number the store writes (epoch ms): a filter range from it leaves null out.
LOWEST: Final = -(2**62)


def at_most(moment: int) -> Document:
    """A filter range of the numbers up to ``moment``, null left out. Both ends are given:
    null sorts below every number in an index, and a server may read the null keys of a
    one-ended ``$lte`` before it leaves them out (the embedded SecantusDB reads every one:
    about 20 ms a thousand rows, where the two-ended range reads what it finds)."""
    return {"$gte": LOWEST, "$lte": moment}


def _or_null(field: str, test: Document) -> Document:
    """``field`` is null or passes ``test`` (in an aggregation expression, null sorts
    below every number, so each comparison says what null means)."""
    return {"$or": [{"$eq": [f"${field}", None]}, test]}


def _unexpired_at(now: Document | int) -> Document:
    """``TaskRecord.is_expired`` negated, as an aggregation expression."""
    return _or_null("expires_at", {"$gt": ["$expires_at", now]})


def _guarded(condition: Document, stages: Sequence[Document]) -> list[Document]:
    """``stages`` (``$set`` stages) applied only where ``condition`` holds, decided once at
    the start (see the module docstring): elsewhere every field keeps its value."""
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


def claimable(now: Document | int = NOW) -> Document:
    """``rules.claimable`` on the document's fields: ``runnable`` (the status machine
    allows a claim and the task has work), due (``retry_at``), unexpired, no live claim."""
    return {
        "$and": [
            {"$eq": ["$runnable", True]},
            _or_null("retry_at", {"$lte": ["$retry_at", now]}),
            _unexpired_at(now),
            _or_null("claim_expires_at", {"$lte": ["$claim_expires_at", now]}),
        ]
    }


def held_until(until: Document | int, grace_ms: int) -> list[Document]:
    """``rules.held_until`` as pipeline stages: ``expires_at = max(expires_at, until)`` (a
    task without TTL stays without), ``ttl_ms = expires_at - created_at`` and the
    janitor's ``gone_at`` (``expires_at`` plus ``grace_ms``) following."""
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


def claim_lane() -> Document:
    """``rules.claim_lane`` as a ``$set`` stage on the fields a claim, renew or release
    writes: none unless ``runnable``; ``waiting`` until the later of ``retry_at`` and the
    claim's end when either is set; else ``ready`` (its place, ``created_at``, is the
    claim order index's own key)."""
    wait: Document = {"$max": ["$retry_at", "$claim_expires_at"]}  # $max skips nulls
    return {
        "$set": {
            "lane": {
                "$cond": [
                    {"$eq": ["$runnable", True]},
                    {"$cond": [{"$eq": [wait, None]}, "ready", "waiting"]},
                    None,
                ]
            },
            "wait_until": {"$cond": [{"$eq": ["$runnable", True]}, wait, None]},
        }
    }


def due(now: int) -> Document:
    """The waiting tasks whose place in ``rules.claim_lane``'s waiting lane has come (a
    retry due, a claim run out), as a filter (on the ``waiting`` index); :func:`promoted`
    moves them to the ready lane. The lanes only narrow what a claim walks: the guard
    (:func:`claimable`) still decides, so a task in the wrong lane is skipped, never
    wrongly taken."""
    return {"wait_until": at_most(now)}


def promoted() -> Document:
    """The update that moves the :func:`due` tasks to the ready lane."""
    return {"$set": {"lane": "ready", "wait_until": None}}


def claim_order(
    after: Document | None = None, work_types: frozenset[str] | None = None
) -> tuple[Document, list[tuple[str, int]], str]:
    """``rules.claim_order`` on the ready lane (of ``work_types`` only, when given:
    S-CLAIM.4): its filter (the page after the document ``after``, by ``created_at`` then
    ``_id``), sort and index."""
    sort = [("created_at", 1), ("_id", 1)]
    lane: Document = {"lane": "ready"}
    index = "claim_order"
    if work_types is not None:
        lane["work_type"] = {"$in": sorted(work_types)}
        index = "claim_type_order"
    if after is None:
        return lane, sort, index
    page: Document = {
        **lane,
        "$or": [
            {"created_at": {"$gt": after["created_at"]}},
            {"created_at": after["created_at"], "_id": {"$gt": after["_id"]}},
        ],
    }
    return page, sort, index


def claim(
    worker_id: str,
    *,
    token: str,
    lease_ms: int,
    version: str,
    grace_ms: int,
    now: Document | int = NOW,
) -> list[Document]:
    """``rules.apply_claim`` guarded by :func:`claimable`, as an update pipeline: generation
    + 1, the claim (``token``, ending ``lease_ms`` after ``now``), ``retry_at`` cleared, the
    task held for the lease (:func:`held_until`), its lane (:func:`claim_lane`), the
    write version ``version`` and the document marked ``dirty`` (its expiry may move:
    :mod:`mcp_tasks_mongodb.counters`)."""
    ends: Document = {"$add": [now, lease_ms]}
    return _guarded(
        claimable(now),
        [
            {
                "$set": {
                    "generation": {"$add": ["$generation", 1]},
                    "claim_worker": {"$literal": worker_id},
                    "claim_token": {"$literal": token},
                    "claim_expires_at": ends,
                    "retry_at": None,
                    "v": {"$literal": version},
                    "dirty": True,
                }
            },
            claim_lane(),
            *held_until(ends, grace_ms),
        ],
    )


def renew(
    lease: Lease, *, lease_ms: int, version: str, grace_ms: int, now: Document | int = NOW
) -> list[Document]:
    """``rules.apply_renew`` as an update pipeline: where the status machine allows a
    renew, the task is unexpired and ``lease`` is its live claim (token and generation),
    the claim ends ``lease_ms`` after ``now``, the task is held as long
    (:func:`held_until`), its lane follows (:func:`claim_lane`), the version becomes
    ``version`` and the document is marked ``dirty``; elsewhere nothing changes (the store
    answers StaleLease)."""
    ends: Document = {"$add": [now, lease_ms]}
    live: Document = {
        "$and": [
            {"$in": ["$status", RENEWABLE]},
            {"$eq": ["$claim_token", {"$literal": lease.token}]},
            {"$eq": ["$generation", lease.generation]},
            _unexpired_at(now),
            {"$ne": ["$claim_expires_at", None]},
            {"$gt": ["$claim_expires_at", now]},
        ]
    }
    return _guarded(
        live,
        [
            {"$set": {"claim_expires_at": ends, "v": {"$literal": version}, "dirty": True}},
            claim_lane(),
            *held_until(ends, grace_ms),
        ],
    )


def release(lease: Lease, version: str) -> tuple[Document, list[Document]]:
    """``rules.apply_release`` as a filter and an update pipeline: the task whose claim is
    ``lease``'s (its token and generation, expired or not) has it freed, its lane follows
    (:func:`claim_lane`) and the version becomes ``version``; no other task matches."""
    # A token is never None, so a task without a claim does not match.
    match = {"_id": lease.task_id, "claim_token": lease.token, "generation": lease.generation}
    update: list[Document] = [
        {
            "$set": {
                "claim_worker": None,
                "claim_token": None,
                "claim_expires_at": None,
                "v": {"$literal": version},
            }
        },
        claim_lane(),
    ]
    return match, update


def unexpired(now: int) -> Document:
    """``rules.counts_toward_cap`` as a filter (the row cap counts on the ``expiry``
    index)."""
    return {"$or": [{"expires_at": None}, {"expires_at": {"$gt": now}}]}


def active(owner: str | None, now: int) -> Document:
    """``rules.is_active`` for one owner's tasks, as a filter (the per-owner cap counts on
    the ``owner_active`` index)."""
    return {"owner": owner, "status": {"$in": LIVE}, **unexpired(now)}


def reapable(now: int, terminal_retention_ms: int) -> list[tuple[Document, str]]:
    """``rules.is_reapable`` as two filters, each with its index: expired, or finished
    without a TTL (``retain_from``, see :mod:`mcp_tasks_mongodb.codec`) for longer than
    the terminal retention. A task is reapable when either selects it."""
    return [
        ({"expires_at": at_most(now)}, "expiry"),
        ({"retain_from": at_most(now - terminal_retention_ms)}, "retained"),
    ]


def _active_at(now: int) -> Document:
    """``rules.is_active`` as an aggregation expression."""
    return {"$and": [{"$in": ["$status", LIVE]}, _unexpired_at(now)]}


def counted(now: int) -> dict[str, Document]:
    """What ``stats`` counts, per figure, as an aggregation expression (true or false) of
    one document at ``now``: ``status_<status>`` (unexpired, in that status:
    ``rules.counts_toward_cap``), ``claimed`` (``rules.is_claimed``), ``lease_lapsed``,
    ``retry_due``, ``retry_pending`` and ``expiring_soon`` (``rules.expires_within`` with
    ``rules.EXPIRY_HORIZON_MS``). Null sorts below every number, so ``$gt`` on a null
    field is false."""
    ready = claimable(now)
    return {
        **{
            f"status_{status.value}": {
                "$and": [{"$eq": ["$status", status.value]}, _unexpired_at(now)]
            }
            for status in TaskStatus
        },
        "claimed": {"$and": [_active_at(now), {"$gt": ["$claim_expires_at", now]}]},
        "lease_lapsed": {"$and": [ready, {"$ne": ["$claim_expires_at", None]}]},
        "retry_due": {"$and": [ready, {"$ne": ["$retry_at", None]}]},
        "waiting_unclaimed": {"$and": [ready, {"$lte": ["$created_at", now - UNCLAIMED_AFTER_MS]}]},
        "retry_pending": {"$and": [_active_at(now), {"$gt": ["$retry_at", now]}]},
        "expiring_soon": {
            "$and": [
                {"$gt": ["$expires_at", now]},
                {"$lte": ["$expires_at", now + EXPIRY_HORIZON_MS]},
            ]
        },
    }


def stats_totals(now: int) -> list[Document]:
    """``stats``' one-document aggregation of every task: ``rows``, a count per
    :func:`counted` figure, and ``oldest_working_created_at`` (unexpired ``working``
    tasks); no document when there is no task."""
    working = {"$and": [{"$eq": ["$status", TaskStatus.WORKING.value]}, _unexpired_at(now)]}
    return [
        {
            "$group": {
                "_id": None,
                "rows": {"$sum": 1},
                **{
                    name: {"$sum": {"$cond": [condition, 1, 0]}}
                    for name, condition in counted(now).items()
                },
                "oldest_working_created_at": {"$min": {"$cond": [working, "$created_at", None]}},
            }
        }
    ]


#: What :func:`stats_totals` answers for a collection without tasks (it has no document).
NO_COUNTS: Final[Document] = {
    "rows": 0,
    **{f"status_{status.value}": 0 for status in TaskStatus},
    **dict.fromkeys(COUNTED, 0),
    "oldest_working_created_at": None,
}


def stats_owners(now: int) -> list[Document]:
    """``stats``' per-owner counts of active tasks (``rules.is_active``, the per-owner cap's
    count), largest first, one ``{n}`` document per owner (ownerless tasks are no owner's):
    the owners themselves never leave the server."""
    return [
        {"$match": {"owner": {"$ne": None}, "status": {"$in": LIVE}, **unexpired(now)}},
        {"$group": {"_id": "$owner", "n": {"$sum": 1}}},
        {"$project": {"_id": 0, "n": 1}},
        {"$sort": {"n": -1}},
    ]
