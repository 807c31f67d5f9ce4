"""The Store rules as pure functions: old record + request + store time → transition.

Every backend reads a record, asks these functions what the write is, and persists the
answer atomically (compare-and-set, a transaction). Where a store must decide on the
server, it restates a rule there as a named piece checked against the rule here
(docs/store-contract.md, "Building a store on the shared rules"): the SQL stores the
``WHERE`` clauses of ``mcp_tasks_sql.statements.Predicates`` (claimable, reapable, the
caps' counts), property-checked by ``mcp_tasks_sql.testing.check_predicates``; Redis
every write as a Lua script (``mcp_tasks_redis.scripts``, the status machine's table
generated into them), checked by the contract suite's rule-agreement part and its
stateful test; MongoDB its query filters and update pipelines (claim, renew, release,
reap, the TTL hold, the caps' counts) in ``mcp_tasks_mongodb.pipelines``, property-checked
against these functions on a real server by the MongoDB package's
``test_mongodb_pipelines.py``. The contract suite's rule-agreement part runs for every
store.

Legality is the status machine's alone (:mod:`mcp_tasks.domain.states`): each write names
its :class:`~mcp_tasks.domain.states.Event` and takes the next status from
:func:`~mcp_tasks.domain.states.next_status`. When the table has no entry, the write
changes nothing, and what the caller sees is decided here, once per kind of write:

* a worker's ``put_status`` and a client's ``cancel`` (:func:`_decide`): a terminal task
  ignores the write (outcome ``unchanged``); a live task refuses it
  (:class:`~mcp_tasks.domain.errors.InvalidTransition`);
* a client's ``update``: the answers are ignored (outcome ``unchanged``);
* ``claim``: the task is not claimable;
* ``renew``: :class:`~mcp_tasks.domain.errors.StaleLease` (the worker must stop).
"""

from __future__ import annotations

from dataclasses import replace
from enum import StrEnum
from typing import TYPE_CHECKING, Final

from mcp_tasks.domain.errors import (
    DuplicateInputKeys,
    EventIdReused,
    InvalidArgument,
    InvalidTransition,
    StaleLease,
    TaskNotFound,
)
from mcp_tasks.domain.ids import new_token
from mcp_tasks.domain.jsonsafe import JSONValue, digest, ensure_json
from mcp_tasks.domain.models import (
    RECENT_EVENTS_KEPT,
    Claim,
    Claimed,
    Complete,
    Fail,
    Lease,
    NewTask,
    Outcome,
    Progress,
    RecordedEvent,
    RequireInput,
    Retry,
    RevisionConflict,
    StatusChange,
    TaskRecord,
    Transition,
    change_to_json,
    input_digest,
)
from mcp_tasks.domain.states import Event, TaskStatus, next_status

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    #: A read-modify-write of one task: (current record or None, store now) → what the
    #: caller gets, and the record to persist (None: write nothing).
    Write = Callable[[TaskRecord | None, int], tuple[Transition, TaskRecord | None]]


class _AnyOwner:
    """Sentinel for trusted server-side reads (workers, TaskControl): skip the owner check."""

    _instance: _AnyOwner | None = None

    def __new__(cls) -> _AnyOwner:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ANY_OWNER"


ANY_OWNER: Final = _AnyOwner()
OwnerArg = str | None | _AnyOwner

#: The work types a claim may take (S-CLAIM.4): ``None`` is any, a set only those.
WorkTypes = frozenset[str] | None


def next_update_time(previous: int, now: int) -> int:
    """``last_updated_at`` strictly increases per applied change, even within one millisecond."""
    return max(now, previous + 1)


def new_record(task: NewTask, now: int) -> TaskRecord:
    """The record ``create`` inserts: at revision 0, unclaimed at generation 0, or claimed
    at generation 1 when the task names the worker it is created for (S-CREATE.6), as
    :func:`apply_claim` claims: kept at least as long as the lease (S-TTL.1)."""
    expires_at = None if task.ttl_ms is None else now + task.ttl_ms
    ttl_ms = task.ttl_ms
    generation = 0
    claim = None
    if task.claimed_by is not None and task.lease_ms is not None:
        # Built claimed in one go: the create path makes one record, not two.
        if task.lease_ms <= 0:
            raise InvalidArgument("lease_ms must be positive")
        generation = 1
        claim = Claim(worker_id=task.claimed_by, token=new_token(), expires_at=now + task.lease_ms)
        expires_at, ttl_ms = _kept_until(expires_at, ttl_ms, now, claim.expires_at)
    return TaskRecord(
        task_id=task.task_id,
        owner=task.owner,
        status=TaskStatus.WORKING,
        revision=0,
        created_at=now,
        last_updated_at=now,
        ttl_ms=ttl_ms,
        expires_at=expires_at,
        poll_interval_ms=task.poll_interval_ms,
        status_message=task.status_message,
        work=task.work,
        generation=generation,
        claim=claim,
        client_capabilities=task.client_capabilities,
    )


def lease_of(record: TaskRecord) -> Lease:
    """The lease a claimed record stands for (a task created claimed, S-CREATE.6).

    Raises:
        StaleLease: the record holds no claim.
    """
    claim = record.claim
    if claim is None:
        raise StaleLease
    return Lease(record.task_id, claim.worker_id, claim.token, record.generation, claim.expires_at)


def visible(record: TaskRecord | None, owner: OwnerArg, now: int) -> TaskRecord:
    """The record if this caller may see it; unknown, foreign and expired are one error."""
    if record is None or record.is_expired(now):
        raise TaskNotFound
    if not isinstance(owner, _AnyOwner) and not record.visible_to(owner):
        raise TaskNotFound
    return record


def counts_toward_cap(record: TaskRecord, now: int) -> bool:
    """The row cap counts rows that have not expired."""
    return not record.is_expired(now)


def is_active(record: TaskRecord, now: int) -> bool:
    """Whether the record counts toward a per-owner cap of active tasks."""
    return not record.status.is_terminal and not record.is_expired(now)


def is_reapable(record: TaskRecord, now: int, terminal_retention_ms: int) -> bool:
    """Expired by TTL, or with no TTL and terminal for longer than the retention."""
    if record.is_expired(now):
        return True
    return (
        record.ttl_ms is None
        and record.status.is_terminal
        and record.last_updated_at + terminal_retention_ms <= now
    )


def held_until(record: TaskRecord, until: int) -> TaskRecord:
    """The record kept at least until ``until``: ``expires_at = max(expires_at, until)`` and
    ``ttl_ms = expires_at - created_at``; a task without TTL stays without (S-TTL.1, S-TTL.2).

    Expiry stays the one predicate :meth:`TaskRecord.is_expired`: a live lease and a fresh
    result move ``expires_at`` itself, so nothing else (reaping, the caps, SQL indexes) needs
    to know about leases or results."""
    expires_at, ttl_ms = _kept_until(record.expires_at, record.ttl_ms, record.created_at, until)
    if expires_at == record.expires_at:
        return record
    return replace(record, expires_at=expires_at, ttl_ms=ttl_ms)


def _kept_until(
    expires_at: int | None, ttl_ms: int | None, created_at: int, until: int
) -> tuple[int | None, int | None]:
    """:func:`held_until`'s ``expires_at`` and ``ttl_ms``, for a record being built."""
    if expires_at is None or expires_at >= until:
        return expires_at, ttl_ms
    return until, until - created_at


def _applied(record: TaskRecord, now: int, **changes: object) -> Transition:
    revision = record.revision + 1
    updated = replace(
        record,
        revision=revision,
        last_updated_at=next_update_time(record.last_updated_at, now),
        **changes,  # type: ignore[arg-type]
    )
    return Transition(updated, Outcome.APPLIED, revision)


def _finished(transition: Transition, now: int, result_retention_ms: int) -> Transition:
    """A write that ended the task keeps it (and its result or error) readable for at least
    ``result_retention_ms`` from ``now`` (S-TTL.2); 0 = off."""
    ended = transition.record
    if (
        transition.outcome is not Outcome.APPLIED
        or not ended.status.is_terminal
        or result_retention_ms <= 0
    ):
        return transition
    return replace(transition, record=held_until(ended, now + result_retention_ms))


def _unchanged(record: TaskRecord) -> Transition:
    return Transition(record, Outcome.UNCHANGED, record.revision)


def apply_update(
    record: TaskRecord | None,
    owner: OwnerArg,
    input_responses: Mapping[str, object],
    now: int,
) -> Transition:
    """``tasks/update``: accept answers to outstanding keys; ignore every other key.

    Answering none of the outstanding keys is no event at all; an answer the status
    machine does not allow is ignored. Either way the outcome is ``unchanged``.
    """
    current = visible(record, owner, now)
    outstanding = current.input_requests
    keys = [key for key in input_responses if key in outstanding]
    if not keys:
        return _unchanged(current)
    event = Event.ANSWER_ALL if outstanding.keys() <= set(keys) else Event.ANSWER_SOME
    status = next_status(current.status, event)
    if status is None:
        return _unchanged(current)
    answered = {key: ensure_json(input_responses[key], "input response") for key in keys}
    return _applied(
        current,
        now,
        status=status,
        input_requests={k: v for k, v in outstanding.items() if k not in answered},
        input_responses={**current.input_responses, **answered},
    )


def _decide(status: TaskStatus, event: Event) -> TaskStatus | None:
    """The next status for a worker's write or a cancel; ``None``: ignore the write.

    With no entry in the table, a terminal task ignores the write and a live task refuses
    it with :class:`InvalidTransition`.
    """
    target = next_status(status, event)
    if target is None and not status.is_terminal:
        raise InvalidTransition(f"'{event}' is not legal while the task is '{status}'")
    return target


def apply_cancel(
    record: TaskRecord | None, owner: OwnerArg, now: int, *, result_retention_ms: int
) -> Transition:
    """``tasks/cancel``: non-terminal → cancelled at once, its status message cleared (the
    body's last progress no longer describes it) and kept readable for
    ``result_retention_ms``; terminal → acknowledged, unchanged."""
    current = visible(record, owner, now)
    status = _decide(current.status, Event.CANCEL)
    if status is None:
        return _unchanged(current)
    cancelled = _applied(current, now, status=status, input_requests={}, status_message=None)
    return _finished(cancelled, now, result_retention_ms)


def fingerprint(change: StatusChange) -> str:
    """A digest of a change's body: the same event id must always carry the same body."""
    return digest(change_to_json(change))


def apply_put(
    record: TaskRecord | None,
    change: StatusChange,
    now: int,
    *,
    result_retention_ms: int,
    lease: Lease | None = None,
    expected_revision: int | None = None,
    event_id: str | None = None,
) -> Transition:
    """A worker's write, checked in this order: lookup, event id, lease, revision, the
    status machine (:func:`_decide`), then the change itself.

    The event id is checked first so that a replay of a write that was applied is always
    recognised, even after the task finished or the lease moved on. A write that ends the
    task keeps it readable for at least ``result_retention_ms`` (S-TTL.2).
    """
    current = visible(record, ANY_OWNER, now)
    digest = fingerprint(change) if event_id is not None else ""
    if event_id is not None:
        for seen in current.recent_events:
            if seen.event_id == event_id:
                if seen.fingerprint != digest:
                    raise EventIdReused
                return Transition(current, Outcome.DUPLICATE, seen.revision)
    check_write_lease(current, lease, now)
    if expected_revision is not None and expected_revision != current.revision:
        raise RevisionConflict(current)
    status = _decide(current.status, put_event(current, change))
    if status is None:
        return _unchanged(current)

    write = _finished(_change(current, change, status, now), now, result_retention_ms)
    if event_id is None or write.outcome is not Outcome.APPLIED:
        return write
    events = (*current.recent_events, RecordedEvent(event_id, digest, write.record.revision))
    updated = replace(write.record, recent_events=events[-RECENT_EVENTS_KEPT:])
    return Transition(updated, Outcome.APPLIED, updated.revision)


def check_write_lease(record: TaskRecord, lease: Lease | None, now: int) -> None:
    """With a lease it must match exactly and be live; without one, no live claim may exist."""
    live = record.live_claim(now)
    if lease is None:
        if live is not None:
            raise StaleLease("The task is claimed by a worker; write with its lease")
        return
    if live is None or live.token != lease.token or record.generation != lease.generation:
        raise StaleLease


def put_event(record: TaskRecord, change: StatusChange) -> Event:
    """The event a worker's change is; a ``Retry`` with no delay left is a ``FAIL``."""
    match change:
        case Progress():
            return Event.PROGRESS
        case RequireInput():
            return Event.REQUIRE_INPUT
        case Complete():
            return Event.COMPLETE
        case Fail():
            return Event.FAIL
        case Retry():
            return Event.FAIL if _retry_delay(record) is None else Event.RETRY


def _retry_delay(record: TaskRecord) -> int | None:
    """The delay before the next attempt, or ``None`` when no retry is left."""
    delays = record.work.retry_delays_ms if record.work is not None else ()
    return delays[record.attempt] if record.attempt < len(delays) else None


def _change(current: TaskRecord, change: StatusChange, status: TaskStatus, now: int) -> Transition:
    """Write ``change``, which the status machine allowed, moving the task to ``status``."""
    message = current.status_message
    match change:
        case Progress(status_message=text):
            return _applied(current, now, status=status, status_message=text)
        case RequireInput(requests=requests, status_message=text):
            reused = current.used_input_keys & requests.keys()
            if reused:
                raise DuplicateInputKeys(reused)
            return _applied(
                current,
                now,
                status=status,
                input_requests=dict(requests),
                asked_inputs={
                    **current.asked_inputs,
                    **{key: input_digest(request) for key, request in requests.items()},
                },
                status_message=text if text is not None else message,
            )
        case Complete(result=result, status_message=text):
            return _applied(
                current,
                now,
                status=status,
                result=result,
                input_requests={},
                status_message=text if text is not None else message,
            )
        case Fail(error=error, status_message=text):
            return _failed(current, status, now, error, text)
        case Retry(error=error, status_message=text):
            delay = _retry_delay(current)
            if delay is None:  # the FAIL event
                return _failed(current, status, now, error, text)
            return _applied(
                current,
                now,
                status=status,
                attempt=current.attempt + 1,
                retry_at=now + delay,
                claim=None,
                input_requests={},
                asked_inputs=unasked(current),
                status_message=text if text is not None else message,
            )


def unasked(record: TaskRecord) -> dict[str, str]:
    """``asked_inputs`` without the keys of the outstanding requests: a question left
    unanswered belongs to the attempt that asked it, and the next may ask it again
    (``S-PUT.6``). Answered keys stay asked for the task's life."""
    return {k: v for k, v in record.asked_inputs.items() if k not in record.input_requests}


def _failed(
    current: TaskRecord,
    status: TaskStatus,
    now: int,
    error: dict[str, JSONValue],
    text: str | None,
) -> Transition:
    fallback = error.get("message")
    return _applied(
        current,
        now,
        status=status,
        error=error,
        input_requests={},
        status_message=text if text is not None else (str(fallback) if fallback else None),
    )


def interrupted(claimed: TaskRecord) -> bool:
    """Whether this claim takes over an attempt an earlier claim began and never ended (its
    process died, or stopped and released it), so the body may have run, wholly or in part.

    Each claim adds one to ``generation``, and an attempt's first claim is its only one
    unless it is interrupted: the task's first claim (made at creation, or of a task created
    for workers) and the claim of a due retry (each retry adds one to ``attempt``). So with
    no interruption so far ``generation == attempt + 1``; once one happened, more. Exact for
    a tool whose interrupted tasks fail at their first takeover (nothing later is claimed);
    for a re-run tool, every claim after a first interruption counts too."""
    return claimed.generation > claimed.attempt + 1


def claimable(record: TaskRecord, now: int) -> bool:
    """The status machine allows a claim, has work, due (``retry_at``), unexpired, and no
    live claim. :func:`apply_claim` takes only a record this says is claimable."""
    return (
        next_status(record.status, Event.CLAIM) is not None
        and record.work is not None
        and (record.retry_at is None or record.retry_at <= now)
        and not record.is_expired(now)
        and record.live_claim(now) is None
    )


def of_work_types(record: TaskRecord, work_types: WorkTypes) -> bool:
    """Whether a claim for ``work_types`` may take ``record`` (S-CLAIM.4): any work type
    when ``None``, else only a task whose work's type is one of them."""
    if work_types is None:
        return True
    return record.work is not None and record.work.type in work_types


# --- what an operator's aggregates count (``stats``), each from the rules above ---------

#: How far ahead :func:`expires_within` looks for ``stats``: an hour.
EXPIRY_HORIZON_MS: Final = 3_600_000

#: How old a claimable task is when :func:`waits_unclaimed` counts it for ``stats``: the
#: default lease (30 s). A process that serves the task's tool claims it within its
#: recovery poll (1 s) unless it already runs ``max_adopted`` bodies.
UNCLAIMED_AFTER_MS: Final = 30_000


def is_claimed(record: TaskRecord, now: int) -> bool:
    """Active and held by a live lease: a worker runs it now."""
    return is_active(record, now) and record.live_claim(now) is not None


def waits_unclaimed(record: TaskRecord, now: int) -> bool:
    """Claimable, and created :data:`UNCLAIMED_AFTER_MS` or more ago: work no running
    process has claimed lately (none serves its tool, or every one is full)."""
    return claimable(record, now) and record.created_at <= now - UNCLAIMED_AFTER_MS


def lease_lapsed(record: TaskRecord, now: int) -> bool:
    """Claimable because its claim ran out: its worker stopped renewing (a crashed or hung
    process), and a recovery loop takes it next."""
    return record.claim is not None and claimable(record, now)


def retry_due(record: TaskRecord, now: int) -> bool:
    """Claimable because its retry's delay has passed: a recovery loop takes it next."""
    return record.retry_at is not None and claimable(record, now)


def retry_pending(record: TaskRecord, now: int) -> bool:
    """Active and waiting for its retry's delay to pass."""
    return is_active(record, now) and record.retry_at is not None and record.retry_at > now


def expires_within(record: TaskRecord, now: int, horizon_ms: int) -> bool:
    """Not expired, and expires within ``horizon_ms`` of ``now`` (unless a lease or its end
    holds it longer: S-TTL.1, S-TTL.2)."""
    expires_at = record.expires_at
    return expires_at is not None and now < expires_at <= now + horizon_ms


class ClaimLane(StrEnum):
    """The two places a task that a claim may take waits in (:func:`claim_lane`)."""

    READY = "ready"
    """Claimable now, in :func:`claim_order` (its place is its ``created_at``)."""
    WAITING = "waiting"
    """Claimable once a pending retry is due or its claim ends (its place is that time)."""


def claim_lane(record: TaskRecord) -> tuple[ClaimLane, int] | None:
    """Where a task waits for a claim, and its place there; ``None`` when no claim can ever
    take it as it is (no work, or the status machine has no ``claim`` for its status).

    A pending retry or claim end puts it in :attr:`ClaimLane.WAITING` until the later of
    the two; otherwise it is :attr:`ClaimLane.READY` at its ``created_at``. Expiry is not a
    lane: :func:`claimable` still decides, so a store's lanes only narrow what a claim
    looks at. Stores that index their tasks for claims file them by this (the memory and
    MongoDB stores call it; Redis's scripts mirror it in a Lua function of the same name).
    """
    if record.work is None or next_status(record.status, Event.CLAIM) is None:
        return None
    claim_ends = None if record.claim is None else record.claim.expires_at
    waits = [t for t in (record.retry_at, claim_ends) if t is not None]
    if waits:
        return ClaimLane.WAITING, max(waits)
    return ClaimLane.READY, record.created_at


def claim_order(record: TaskRecord) -> tuple[int, str]:
    """Claims without a task id take the oldest eligible task: by ``created_at``, then id."""
    return (record.created_at, record.task_id)


def apply_claim(record: TaskRecord, worker_id: str, lease_ms: int, now: int) -> Claimed:
    """A fresh claim: generation + 1, a new random token; no revision change. The task is
    kept at least as long as the lease (S-TTL.1)."""
    if lease_ms <= 0:
        raise InvalidArgument("lease_ms must be positive")
    generation = record.generation + 1
    claim = Claim(worker_id=worker_id, token=new_token(), expires_at=now + lease_ms)
    claimed = replace(
        held_until(record, claim.expires_at), generation=generation, claim=claim, retry_at=None
    )
    lease = Lease(record.task_id, worker_id, claim.token, generation, claim.expires_at)
    return Claimed(claimed, lease)


def apply_renew(record: TaskRecord | None, lease: Lease, lease_ms: int, now: int) -> Claimed:
    """Extend a live lease, and the task at least as long (S-TTL.1); anything else means the
    worker must stop (:class:`StaleLease`)."""
    if lease_ms <= 0:
        raise InvalidArgument("lease_ms must be positive")
    if record is None or record.is_expired(now) or next_status(record.status, Event.RENEW) is None:
        raise StaleLease
    check_write_lease(record, lease, now)
    assert record.claim is not None  # check_write_lease proved a live claim
    claim = replace(record.claim, expires_at=now + lease_ms)
    renewed = replace(lease, expires_at=claim.expires_at)
    return Claimed(replace(held_until(record, claim.expires_at), claim=claim), renewed)


def apply_release(record: TaskRecord | None, lease: Lease) -> TaskRecord | None:
    """The record with the claim freed, or ``None`` when the lease is stale (a no-op)."""
    if (
        record is None
        or record.claim is None
        or record.claim.token != lease.token
        or record.generation != lease.generation
    ):
        return None
    return replace(record, claim=None)


# --- a maintenance rewrite (``Rewrites.rewrite_after``: ``mcp-tasks rekey``) -------------


def rewritten(record: TaskRecord, proposed: TaskRecord | None) -> TaskRecord | None:
    """What a rewrite writes in place of ``record``: ``proposed``'s payload (status message,
    input requests, answers, asked inputs, result, error, work) on everything else of
    ``record`` (status, revision, times, claim, generation); ``None`` when that is no change."""
    if proposed is None:
        return None
    written = replace(
        record,
        status_message=proposed.status_message,
        input_requests=proposed.input_requests,
        input_responses=proposed.input_responses,
        asked_inputs=proposed.asked_inputs,
        result=proposed.result,
        error=proposed.error,
        work=proposed.work,
    )
    return None if written == record else written


# --- the writes of update, cancel and put_status, for read-modify-write backends ---------


def written(transition: Transition) -> tuple[Transition, TaskRecord | None]:
    """A transition and the record to persist: only an applied change writes."""
    return transition, transition.record if transition.outcome is Outcome.APPLIED else None


def update_write(owner: OwnerArg, input_responses: Mapping[str, object]) -> Write:
    """``update`` as a read-modify-write (:func:`apply_update`)."""
    return lambda record, now: written(apply_update(record, owner, input_responses, now))


def cancel_write(owner: OwnerArg, *, result_retention_ms: int) -> Write:
    """``cancel`` as a read-modify-write (:func:`apply_cancel`)."""
    return lambda record, now: written(
        apply_cancel(record, owner, now, result_retention_ms=result_retention_ms)
    )


def put_write(
    change: StatusChange,
    *,
    result_retention_ms: int,
    lease: Lease | None = None,
    expected_revision: int | None = None,
    event_id: str | None = None,
) -> Write:
    """``put_status`` as a read-modify-write (:func:`apply_put`)."""
    return lambda record, now: written(
        apply_put(
            record,
            change,
            now,
            result_retention_ms=result_retention_ms,
            lease=lease,
            expected_revision=expected_revision,
            event_id=event_id,
        )
    )
