"""The task aggregate and the values a Store takes and returns.

Times are integer milliseconds since the Unix epoch on the Store's clock; the wire
layer renders them as RFC 3339. Every JSON payload has passed :mod:`mcp_tasks.domain.jsonsafe`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Final, TypeAlias, TypeGuard

from mcp_tasks.domain.errors import (
    InvalidArgument,
    InvalidInputRequests,
    MCPTasksError,
    NotJSONSafe,
)
from mcp_tasks.domain.jsonsafe import JSONObject, JSONValue, digest, ensure_json, ensure_object

if TYPE_CHECKING:
    from mcp_tasks.domain.states import TaskStatus

# Methods a task may ask its client through inputRequests (SEP-2663 InputRequest).
INPUT_METHODS: Final = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})

# How many worker event ids a task remembers for idempotent replay.
RECENT_EVENTS_KEPT: Final = 64


@dataclass(frozen=True, slots=True)
class WorkSpec:
    """What a runner should execute for a task; ``None`` on the task means manual mode.

    ``trace_context`` is the W3C trace context (``traceparent``, ``tracestate``) of the
    request that created the task, so a run on any process links to the trace that created
    it; empty when nobody traced that request. It is kept with the rest of the work, as JSON
    every store already round-trips."""

    type: str
    input: JSONValue = None
    idempotency_key: str | None = None
    retry_delays_ms: tuple[int, ...] = ()
    trace_context: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.type, str) or not self.type:
            raise NotJSONSafe("work.type must be a non-empty string")
        object.__setattr__(self, "input", ensure_json(self.input, "work.input"))
        delays = tuple(self.retry_delays_ms)
        if any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in delays):
            raise NotJSONSafe("work.retry_delays_ms must be non-negative integers")
        object.__setattr__(self, "retry_delays_ms", delays)
        context = dict(self.trace_context)
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in context.items()):
            raise NotJSONSafe("work.trace_context must map strings to strings")
        object.__setattr__(self, "trace_context", context)

    def to_json(self) -> JSONObject:
        data: JSONObject = {
            "type": self.type,
            "input": self.input,
            "idempotency_key": self.idempotency_key,
            "retry_delays_ms": list(self.retry_delays_ms),
        }
        if self.trace_context:  # left out untraced: the stored work is what it always was
            data["trace_context"] = dict(self.trace_context)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, JSONValue]) -> WorkSpec:
        """The work :meth:`to_json` wrote, decoded. Its checks ran when the work was made
        and are not run again: a store reads the work back on every ``get``, and copying
        the input through :func:`ensure_json` cost more than decoding it."""
        delays = data.get("retry_delays_ms") or []
        key = data.get("idempotency_key")
        context = data.get("trace_context")
        work = object.__new__(cls)
        for name, value in (
            ("type", str(data["type"])),
            ("input", data.get("input")),
            ("idempotency_key", None if key is None else str(key)),
            (
                "retry_delays_ms",
                tuple(int(d) for d in delays) if isinstance(delays, list) else (),  # type: ignore[arg-type]
            ),
            (
                "trace_context",
                {str(k): str(v) for k, v in context.items()} if isinstance(context, dict) else {},
            ),
        ):
            object.__setattr__(work, name, value)
        return work


@dataclass(frozen=True, slots=True)
class Claim:
    """A worker's hold on a task, live until ``expires_at`` on the store clock."""

    worker_id: str
    token: str
    expires_at: int


@dataclass(frozen=True, slots=True)
class Lease:
    """What a worker holds after a claim; every leased write must present it exactly."""

    task_id: str
    worker_id: str
    token: str
    generation: int
    expires_at: int

    def __repr__(self) -> str:  # the task id is a bearer capability: keep it out of logs
        return f"Lease(worker_id={self.worker_id!r}, generation={self.generation})"


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    """A worker write remembered by its event id, for idempotent replay."""

    event_id: str
    fingerprint: str
    revision: int


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One task, the whole aggregate a Store keeps."""

    task_id: str
    owner: str | None
    status: TaskStatus
    revision: int
    created_at: int
    last_updated_at: int
    ttl_ms: int | None
    expires_at: int | None
    poll_interval_ms: int | None = None
    status_message: str | None = None
    input_requests: Mapping[str, JSONObject] = field(default_factory=dict)
    input_responses: Mapping[str, JSONValue] = field(default_factory=dict)
    asked_inputs: Mapping[str, str] = field(default_factory=dict)
    """Every input key ever requested on this task → the digest of its request
    (:func:`input_digest`): keys are unique over the task's life, and a body that asks a key
    again is told whether it asks the same question (a replay) or another one."""
    result: JSONObject | None = None
    error: JSONObject | None = None
    work: WorkSpec | None = None
    attempt: int = 0
    retry_at: int | None = None
    generation: int = 0
    claim: Claim | None = None
    recent_events: tuple[RecordedEvent, ...] = ()
    client_capabilities: JSONObject | None = None

    def __repr__(self) -> str:  # never print the id or payloads into logs
        return f"TaskRecord(status={self.status.value!r}, revision={self.revision})"

    @property
    def used_input_keys(self) -> frozenset[str]:
        """Every input key ever requested on this task."""
        return frozenset(self.asked_inputs)

    def is_expired(self, now: int) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def live_claim(self, now: int) -> Claim | None:
        """The claim if it has not expired by ``now``."""
        if self.claim is not None and self.claim.expires_at > now:
            return self.claim
        return None

    def visible_to(self, owner: str | None) -> bool:
        """A task with no owner answers to anyone; otherwise only to its owner."""
        return self.owner is None or self.owner == owner


class RevisionConflict(MCPTasksError):
    """The task changed since the expected revision."""

    def __init__(self, current: TaskRecord, message: str | None = None) -> None:
        super().__init__(message)
        self.current = current


#: The TTL of a task whose tool and request name none: an hour.
DEFAULT_TTL_MS: Final = 3_600_000


@dataclass(frozen=True, slots=True)
class NewTask:
    """What ``Store.create`` takes. The engine mints ``task_id`` (:mod:`mcp_tasks.domain.ids`)."""

    task_id: str
    owner: str | None = None
    ttl_ms: int | None = DEFAULT_TTL_MS
    poll_interval_ms: int | None = None
    status_message: str | None = None
    work: WorkSpec | None = None
    client_capabilities: JSONObject | None = None
    """The creating request's client capabilities: every input request the task makes is
    checked against them, on any node and after a re-run. ``None``: not known (not checked)."""
    claimed_by: str | None = None
    """Create the task already claimed by this worker (S-CREATE.6), for ``lease_ms``: no
    other worker's claim can take it between its creation and its first run."""
    lease_ms: int | None = None

    def __post_init__(self) -> None:
        _check_positive_ms(self.ttl_ms, "ttl_ms")
        if self.claimed_by is not None:
            _check_claim(self.claimed_by, self.work, self.lease_ms)
        elif self.lease_ms is not None:
            raise InvalidArgument("lease_ms is only meaningful with claimed_by")
        if self.client_capabilities is not None:
            object.__setattr__(
                self,
                "client_capabilities",
                ensure_object(self.client_capabilities, "client_capabilities"),
            )
        _check_positive_ms(self.poll_interval_ms, "poll_interval_ms")
        if not isinstance(self.task_id, str) or not self.task_id:
            raise NotJSONSafe("task_id must be a non-empty string")
        if self.status_message is not None:
            ensure_json(self.status_message, "status_message")

    def claimed(self, worker_id: str, lease_ms: int) -> NewTask:
        """This task, to be created claimed by ``worker_id`` for ``lease_ms`` (S-CREATE.6).

        Only the claim is checked: the rest was checked when this task was made, and copying
        the client's capabilities again is a cost on every create.

        Raises:
            InvalidArgument: no worker id, no work, or a lease that is not a positive integer.
        """
        _check_claim(worker_id, self.work, lease_ms)
        task = object.__new__(NewTask)
        for name in NewTask.__slots__:
            object.__setattr__(task, name, getattr(self, name))
        object.__setattr__(task, "claimed_by", worker_id)
        object.__setattr__(task, "lease_ms", lease_ms)
        return task


def _check_claim(worker_id: object, work: WorkSpec | None, lease_ms: object) -> None:
    """A task created claimed (S-CREATE.6): a worker id, work to run, a positive lease."""
    if not isinstance(worker_id, str) or not worker_id:
        raise InvalidArgument("claimed_by must be a non-empty worker id")
    if work is None:
        raise InvalidArgument("only a task with work can be created claimed")
    if lease_ms is None or not is_positive_ms_or_none(lease_ms):
        raise InvalidArgument("lease_ms must be a positive integer with claimed_by")


def is_positive_ms_or_none(value: object) -> TypeGuard[int | None]:
    """Whether ``value`` can be a TTL or a poll interval: a positive integer (not a bool), or
    ``None``."""
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value > 0)


def _check_positive_ms(value: int | None, what: str) -> None:
    if not is_positive_ms_or_none(value):
        raise NotJSONSafe(f"{what} must be a positive integer or None")


# --- worker changes (Store.put_status) -------------------------------------------------


@dataclass(frozen=True, slots=True)
class Progress:
    """Record progress as the task's ``statusMessage``; the status does not move."""

    status_message: str

    def __post_init__(self) -> None:
        ensure_json(self.status_message, "status_message")


@dataclass(frozen=True, slots=True)
class RequireInput:
    """Park the task in ``input_required`` until every request is answered."""

    requests: Mapping[str, JSONObject]
    status_message: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "requests", validate_input_requests(self.requests))


@dataclass(frozen=True, slots=True)
class Complete:
    """Finish with the result the original request would have returned."""

    result: JSONObject
    status_message: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "result", ensure_object(self.result, "result"))


@dataclass(frozen=True, slots=True)
class Fail:
    """Finish with a JSON-RPC error ``{code, message, data?}``."""

    error: JSONObject
    status_message: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "error", validate_error(self.error))


@dataclass(frozen=True, slots=True)
class Retry:
    """This attempt failed; run again after the next retry delay, or fail with ``error``."""

    error: JSONObject
    status_message: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "error", validate_error(self.error))


StatusChange: TypeAlias = Progress | RequireInput | Complete | Fail | Retry


def change_to_json(change: StatusChange) -> JSONObject:
    """A change as JSON: what a fingerprint is computed from."""
    body: JSONObject = {"kind": type(change).__name__.lower()}
    match change:
        case Progress(status_message=message):
            body["status_message"] = message
        case RequireInput(requests=requests, status_message=message):
            body["requests"] = dict(requests)
            body["status_message"] = message
        case Complete(result=result, status_message=message):
            body["result"] = result
            body["status_message"] = message
        case Fail(error=error, status_message=message) | Retry(error=error, status_message=message):
            body["error"] = error
            body["status_message"] = message
    return body


def input_digest(request: Mapping[str, JSONValue]) -> str:
    """A digest of one input request (``{method, params}``), to tell a replayed question from
    a different one under the same key."""
    return digest(dict(request))


def validate_error(error: object) -> JSONObject:
    """A JSON-RPC error object: integer ``code``, string ``message``, optional ``data``."""
    checked = ensure_object(error, "error")
    code, message = checked.get("code"), checked.get("message")
    if isinstance(code, bool) or not isinstance(code, int) or not isinstance(message, str):
        raise NotJSONSafe("error must carry an integer code and a string message")
    return checked


def validate_input_requests(requests: object) -> dict[str, JSONObject]:
    """A non-empty map of key to ``{method, params}`` (SEP-2663 InputRequests)."""
    if not isinstance(requests, Mapping) or not requests:
        raise InvalidInputRequests
    out: dict[str, JSONObject] = {}
    for key, request in requests.items():
        if not isinstance(key, str) or not key:
            raise InvalidInputRequests("Input request keys must be non-empty strings")
        try:
            checked = ensure_object(request, "input request")
        except NotJSONSafe as exc:
            raise InvalidInputRequests(str(exc)) from None
        if checked.get("method") not in INPUT_METHODS:
            raise InvalidInputRequests(
                f"Input request method must be one of {', '.join(sorted(INPUT_METHODS))}"
            )
        if "params" in checked and not isinstance(checked["params"], dict):
            raise InvalidInputRequests("Input request params must be an object")
        out[key] = checked
    return out


# --- results of writes -----------------------------------------------------------------


class Outcome(StrEnum):
    """What a write did."""

    APPLIED = "applied"  # the change was written: revision + 1
    UNCHANGED = "unchanged"  # a valid no-op: nothing written
    DUPLICATE = "duplicate"  # an event id replayed: nothing written


@dataclass(frozen=True, slots=True)
class Transition:
    """A successful write: the record after the call, and what the call did.

    ``revision`` is the revision the change produced; for a ``duplicate`` it is the
    revision the original write produced, while ``record`` is the current one.
    """

    record: TaskRecord
    outcome: Outcome
    revision: int


@dataclass(frozen=True, slots=True)
class Claimed:
    """A successful claim: the task as claimed and the lease to present on every write."""

    record: TaskRecord
    lease: Lease


@dataclass(frozen=True, slots=True)
class StoreOptions:
    """Behaviour every Store takes the same way."""

    max_rows: int | None = 10_000
    """Rows that are not expired, at most; ``None`` = unlimited."""
    max_active_per_owner: int | None = 1_000
    """``working``/``input_required`` tasks per owner, at most; ``None`` = unlimited.

    A tenth of the default row cap, so that one principal cannot fill the table and refuse
    every other principal's creates. Tasks without an owner (a server without auth) are
    bounded by ``max_rows`` alone: see :meth:`owner_cap`."""
    terminal_retention_ms: int = 3_600_000
    """How long a task with no TTL is kept after it turned terminal."""
    result_retention_ms: int = 60_000
    """How long a task with a TTL stays readable at least once it ended (completed, failed,
    cancelled), even when its TTL ran out while it ran: its ``expires_at`` becomes at least
    the end + this (S-TTL.2). 0 = off (the TTL alone decides)."""
    timeout_ms: int = 5_000
    """How long one operation may wait for a store that does not answer (unreachable,
    failing, locked) before it raises ``StoreUnavailable`` (a request answers -32603). The
    drivers' own timeouts are set from it, and an overall bound holds where a driver has
    none; a store URL's ``?timeout_ms=`` sets it too."""

    def owner_cap(self, owner: str | None) -> int | None:
        """The per-owner cap a create for ``owner`` is held to; ``None`` = none.

        Only principals are capped: tasks without an owner come from callers that cannot be
        told apart (a server without auth), where a per-owner cap would only be a second,
        smaller row cap."""
        return None if owner is None else self.max_active_per_owner

    def __post_init__(self) -> None:
        timeout: object = self.timeout_ms
        if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout <= 0:
            raise InvalidArgument("timeout_ms must be a positive integer")
        for name in ("max_rows", "max_active_per_owner"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise InvalidArgument(f"{name} must be a positive integer or None")
        for name in ("terminal_retention_ms", "result_retention_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgument(f"{name} must be a non-negative integer")
