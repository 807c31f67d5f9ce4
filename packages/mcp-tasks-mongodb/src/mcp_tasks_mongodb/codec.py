"""The task document: one per task, its fields, its indexes, and the record ↔ document codec.

A task document holds the record's columns (:func:`mcp_tasks.stores.codec.columns_of`,
``_id`` being the task id) as BSON fields, the claim as three fields (``claim_worker``,
``claim_token``, ``claim_expires_at``), and everything else as one JSON string
(``payload``: BSON cannot keep every JSON-safe value exactly, e.g. NUL in keys). More
fields serve the store:

* ``v``, a random write version every write replaces (the compare-and-set of
  read-modify-writes, and how a guarded update tells it wrote);
* ``runnable``, whether the status machine allows a claim and the task has work;
* ``lane`` and ``wait_until``, where the task waits for a claim
  (:func:`mcp_tasks.domain.rules.claim_lane`): ``ready`` (``wait_until`` none), or
  ``waiting`` until ``wait_until``; none when no claim can take it. A claim without an id
  walks only the ready lane (:mod:`mcp_tasks_mongodb.claims`);
* ``retain_from``, for a finished task without TTL, when its terminal retention started;
* ``gone_at``, the date the janitor deletes the document (``expires_at`` plus a grace), on a
  server without transactions (:data:`JANITOR`);
* ``dirty`` (true, or absent) and ``f``, how the document stands in the counters
  (:mod:`mcp_tasks_mongodb.counters`).

Queries by anything but ``_id`` are plain range predicates on one index each
(:data:`INDEXES`; no ``$expr`` in a filter: not every server's planner uses an index for
it).
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pymongo import ASCENDING

from mcp_tasks.domain import rules
from mcp_tasks.domain.jsonsafe import dumps, loads
from mcp_tasks.stores.codec import columns_of, payload_of, record_from

if TYPE_CHECKING:
    from collections.abc import Mapping

    from mcp_tasks.domain.models import TaskRecord

__all__ = ["INDEXES", "JANITOR", "Document", "document_of", "epoch_ms", "new_version", "record_of"]

Document = dict[str, Any]

#: The indexes ``migrate`` creates (and the first use of a handle): name → keys, options.
INDEXES: dict[str, tuple[list[tuple[str, int]], dict[str, Any]]] = {
    # claim without an id: the ready lane in rules.claim_order.
    "claim_order": ([("lane", ASCENDING), ("created_at", ASCENDING), ("_id", ASCENDING)], {}),
    # claim for some work types (S-CLAIM.4): the ready lane of each, in rules.claim_order
    # (a claim for several types reads them merged, in that order).
    "claim_type_order": (
        [
            ("lane", ASCENDING),
            ("work_type", ASCENDING),
            ("created_at", ASCENDING),
            ("_id", ASCENDING),
        ],
        {},
    ),
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
    # the documents written since the counters' last fold (mcp_tasks_mongodb.counters).
    "dirty": ([("dirty", ASCENDING)], {"sparse": True}),
    # stats: the leases of the tasks of each status (live, lapsed).
    "leases": ([("status", ASCENDING), ("claim_expires_at", ASCENDING)], {}),
    # stats: the retries of the tasks of each status (due, pending).
    "retries": ([("status", ASCENDING), ("retry_at", ASCENDING)], {}),
    # stats: the working tasks by age (the oldest).
    "working_age": ([("status", ASCENDING), ("created_at", ASCENDING)], {}),
}

#: The janitor, on a server without transactions only (where the store keeps no counters:
#: a deletion by the TTL monitor would pass them by): the TTL monitor deletes a document
#: once its ``gone_at`` has passed.
JANITOR: tuple[str, list[tuple[str, int]], dict[str, Any]] = (
    "janitor",
    [("gone_at", ASCENDING)],
    {"expireAfterSeconds": 0},
)


def new_version() -> str:
    """A fresh write version: random, so a re-created id never meets an old version."""
    return secrets.token_hex(8)


_EPOCH = datetime(1970, 1, 1)  # naive UTC, as PyMongo decodes BSON dates


def epoch_ms(moment: datetime) -> int:
    """A BSON date (naive UTC, as PyMongo decodes it by default) as epoch ms, exactly:
    integer arithmetic (a float timestamp times 1000 can land a millisecond low)."""
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def _gone_at(expires_at: int | None, grace_ms: int) -> datetime | None:
    if expires_at is None:
        return None
    return datetime.fromtimestamp((expires_at + grace_ms) / 1000, tz=UTC)


def document_of(record: TaskRecord, grace_ms: int) -> Document:
    """The task document of ``record`` (see the module docstring), with a fresh version;
    the TTL index deletes it ``grace_ms`` after it expires."""
    columns = columns_of(record)
    del columns["task_id"]
    payload = payload_of(record)
    payload["claim"] = None  # the claim lives in its own fields, which claims update
    claim = record.claim
    lane = rules.claim_lane(record)
    return {
        "_id": record.task_id,
        **columns,
        "runnable": lane is not None,  # the status machine allows a claim, and work
        "lane": None if lane is None else lane[0].value,
        "wait_until": lane[1] if lane is not None and lane[0] is rules.ClaimLane.WAITING else None,
        # only claims, renewals and releases write without this function: none ends a task
        "retain_from": record.last_updated_at
        if record.status.is_terminal and record.ttl_ms is None
        else None,
        "claim_worker": None if claim is None else claim.worker_id,
        "claim_token": None if claim is None else claim.token,
        "payload": dumps(payload),
        "v": new_version(),
        "gone_at": _gone_at(record.expires_at, grace_ms),
        "dirty": True,  # written since the counters' last fold (mcp_tasks_mongodb.counters)
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
