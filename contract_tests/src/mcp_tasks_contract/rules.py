"""The rule catalogue: every Store contract rule id and the one-line property it names, and
the optional behaviours a store may lack.

Ids follow the repository's ``docs/store-contract.md``, which states each rule in full:
``S-…`` for the operations, ``INV-…`` for the invariants the stateful test checks after
every step. Every contract test carries ``@pytest.mark.rule(...)`` with the ids it proves;
meta-tests keep the tests, this catalogue and the document in step.
"""

from __future__ import annotations

from typing import Final

RULES: Final[dict[str, str]] = {
    # create
    "S-CREATE.1": "create checks id uniqueness and the row cap and inserts task plus work "
    "atomically, returning the record at revision 0",
    "S-CREATE.2": "at the row cap of unexpired rows (or the per-owner cap of active tasks) "
    "create raises TaskLimitReached and writes nothing",
    "S-CREATE.3": "a created task is visible to get on any handle as soon as create returns",
    "S-CREATE.4": "creating an existing id raises DuplicateTaskId and leaves the original "
    "untouched",
    "S-CREATE.5": "a task keeps its creating request's client capabilities exactly as given, "
    "unchanged by every later write",
    "S-CREATE.6": "a task created with claimed_by is inserted claimed at generation 1 in the "
    "same atomic step; no other claim takes it while the lease lives",
    # get
    "S-GET.1": "unknown, foreign-owner and expired tasks raise the same TaskNotFound",
    "S-GET.2": "a task with owner None answers to any caller",
    "S-GET.3": "get is a pure read: it never changes the record",
    # update (tasks/update)
    "S-UPDATE.1": "update is owner- and expiry-bound like get",
    "S-UPDATE.2": "keys that are not outstanding are ignored; none outstanding means unchanged",
    "S-UPDATE.3": "a partial answer keeps input_required and removes the answered keys at once",
    "S-UPDATE.4": "answering the last outstanding key moves the task to working and keeps "
    "the responses for the worker",
    "S-UPDATE.5": "update is an atomic read-modify-write: it never overwrites a completion",
    # cancel (tasks/cancel)
    "S-CANCEL.1": "cancel moves a non-terminal task to cancelled at once, clears outstanding "
    "input and leaves the claim for the worker",
    "S-CANCEL.2": "cancel of a terminal task is unchanged; foreign, unknown or expired raise "
    "TaskNotFound",
    "S-CANCEL.3": "a cancelled task has no status message: the body's last progress is cleared",
    # put_status (worker writes)
    "S-PUT.1": "a leased write needs the exact live lease; an unleased write needs no live "
    "claim held by someone else",
    "S-PUT.2": "a replayed event id with the same body is a duplicate, with another body "
    "EventIdReused; checked before the revision",
    "S-PUT.3": "a stale expected_revision raises RevisionConflict and writes nothing",
    "S-PUT.4": "terminal tasks are final: any change is unchanged and nothing resurrects them",
    "S-PUT.5": "input may be requested only from working, with keys unique over the task's "
    "life and well-formed requests",
    "S-PUT.6": "retry takes the next delay, sets retry_at, counts the attempt and releases "
    "the claim; with no delay left it fails the task",
    # claims
    "S-CLAIM.1": "claim takes an eligible task (non-terminal, has work, due, unclaimed): the "
    "given one, or the oldest by created_at then id",
    "S-CLAIM.2": "a new claim gets generation + 1, a fresh token and expires at store now + "
    "lease_ms, without a revision change",
    "S-CLAIM.3": "under any concurrency each task is claimed at most once per generation",
    "S-CLAIM.4": "a claim for some work types takes only tasks of those types, in one step; "
    "a task no claim asks for waits (its TTL still runs) until a claim of its type",
    "S-RENEW": "renew extends a live lease without a revision change; expired, superseded, "
    "terminal or reaped raises StaleLease",
    "S-RELEASE": "release frees the claim at once keeping the generation; a stale lease is a no-op",
    # TTL
    "S-TTL.1": "a claim or renew moves expires_at (and ttl_ms) to at least the lease's end: a "
    "task with a live lease never expires",
    "S-TTL.2": "a task that ends keeps expires_at (and ttl_ms) at least its end + "
    "result_retention_ms: its outcome stays readable",
    "S-REAP": "reap deletes whole expired aggregates and terminal no-TTL tasks past the "
    "retention, bounded, idempotent, safe beside reapers and writers",
    "S-NOLIST": "a store offers no way to list, scan or count tasks",
    "S-OPS": "a store implements every operation of the Store protocol with its signature",
    "S-JSON": "JSON-safe results, errors, requests and responses round-trip exactly; "
    "anything else is rejected at the boundary with nothing written",
    "S-CLOSE": "close is idempotent, and a closed handle refuses every other operation with "
    "StoreUnavailable, writing nothing",
    "S-CALLER": "a non-positive lease_ms to claim or renew raises ValueError, never "
    "StoreUnavailable, and writes nothing",
    "S-DURABLE": "closing and reopening a handle loses no acknowledged write and keeps "
    "live claims valid",
    # invariants (checked after every step of the stateful test)
    "INV-REVISION": "revision equals the number of applied changes",
    "INV-TERMINAL": "a terminal task never changes status, result or error again",
    "INV-CLAIM": "at most one live claim per task; generations strictly increase",
    "INV-FOREIGN": "a foreign task is indistinguishable from a missing one",
    "INV-EXPIRED": "an expired task is indistinguishable from a missing one",
    "INV-CAP": "stored rows never exceed the cap",
    "INV-NOPARTIAL": "no error leaves a partial write behind",
    "INV-TIMES": "created_at <= last_updated_at, and last_updated_at strictly increases per "
    "applied change",
}

#: What a store may lack ("Required and optional behaviour" in the doc). A store's contract
#: subclass declares which it offers (``StoreContract.offers``, an
#: :class:`~mcp_tasks_contract.offers.Offers`); the suite proves each one offered and reports
#: the others "not offered". Every rule of :data:`RULES` stays mandatory.
OPTIONAL: Final[dict[str, str]] = {
    "O-CLOCK": "the store takes an injected clock: the suite's ManualClock is its time",
    "O-NAMESPACES": "a handle's url names its backend's namespace: namespaced_url points it at "
    "another, isolated one, and drop_namespace deletes that one's tasks",
    "O-NOTIFIER": "a cross-process notifier under the store's URL scheme: a change published "
    "on one handle's notifier wakes a subscriber on another's",
    "O-RESTART": "every acknowledged write survives a restart of the store's server",
    "O-REWRITE": "rewrite_after visits every task once in id order and writes only its "
    "payload, with a compare-and-set: no write that comes between is lost",
    "O-COUNTS": "counts() gives exactly the rows and unexpired tasks per status stats() "
    "gives, across concurrent writes, expiry by TTL and concurrent reaps",
}
