"""The Redis Store: one hash per task, sorted sets as indexes, one Lua script per operation.

Keys of one namespace (``prefix``) all share the hash tag ``{prefix}``, so a namespace lives
in one cluster slot and every script touches one slot:

* ``{p}:t:<task id>`` — a hash. Scalars: ``s`` status, ``n`` revision, ``c`` created_at,
  ``u`` last_updated_at, ``e`` expires_at, ``l`` ttl_ms, ``m`` status message (absent:
  none), ``at`` attempt, ``r`` retry_at, ``g`` generation, ``cw``/``ct``/``ce`` the claim's
  worker, token and end, ``qn`` how many input requests are outstanding, ``w`` has work,
  ``rd`` the work's retry delays, ``o`` the owner (absent: none), ``a`` the key of the
  owner's active set. JSON texts the scripts never parse: ``x`` what never changes after
  ``create`` (id, owner, poll interval, work, client capabilities), ``res`` the result,
  ``err`` the error, ``q:<key>`` an outstanding input request, ``i:<key>`` an answer;
  ``d:<key>`` the digest of every request ever asked; ``ev`` the recent event ids (JSON
  the store writes itself); ``op`` the nonces of the last writes and what they answered
  (how a resent script knows it has run; never part of a record). ``''`` is "none" for a
  scalar time.
* ``{p}:rows`` — every task by ``expires_at`` (``+inf`` without TTL): the row cap counts
  the unexpired ones, ``reap`` takes the expired ones;
* ``{p}:rows:<status>`` — the tasks of that status by ``expires_at``: ``counts()`` counts
  the unexpired ones of each (``ZCOUNT``); ``{p}:rows:counted`` says every task is filed
  (set by a namespace's first create, or by ``migrate`` once it has filed the tasks
  written before the sets existed);
* ``{p}:rows:leases`` / ``{p}:rows:retries`` — the live tasks with a claim, by its end, and
  with a retry, by ``retry_at``; ``{p}:rows:working-since`` — the working tasks by
  ``created_at``; ``{p}:rows:owners`` / ``{p}:rows:owner-expiry`` — each owner's active set
  (its key) by its size and by its earliest ``expires_at``: what ``stats()`` counts from,
  kept by the writes like the status sets (and filed by ``migrate`` with them);
* ``{p}:active:n`` / ``{p}:active:s:<owner>`` — one owner's live tasks by ``expires_at``:
  the per-owner cap;
* ``{p}:ready:<work type>`` — live tasks of that work type (the hash's ``wt``) in
  ``rules.claim_lane``'s ready lane (work, no claim and no pending retry), by ``created_at``
  (members of one score sort by id: exactly ``rules.claim_order``); ``{p}:ready-types``
  the types that have one. A claim for some types reads the heads of their sets only
  (S-CLAIM.4). ``{p}:ready`` holds tasks filed before the sets per type: claims move them;
* ``{p}:delayed`` — live tasks in its waiting lane (waiting for their claim's end or
  ``retry_at``), by that time; a claim moves the due ones into ``ready``;
* ``{p}:retain`` — terminal tasks without TTL by ``last_updated_at`` (``S-REAP``);
* ``{p}:claim:<token>`` — the id of the task a claim without an id took, for the lease's
  time (``PX``): how a resend of that claim finds its task.

Every operation is one script (:mod:`mcp_tasks_redis.scripts`), one round trip, with the
server's clock; ``get`` too (the record and the server's now). Scripts run by SHA; redis-py
loads them again on ``NOSCRIPT`` (a script that answered ``NOSCRIPT`` has not run). After a
connection error or timeout both clients send the script again (:func:`_connect`), also one
the server had run before the connection broke: every write carries a nonce of its call,
the same in each resend, and a script that finds its own nonce recorded answers what its
first run answered and writes nothing (:mod:`mcp_tasks_redis.scripts`). A hash also
expires by itself (``PEXPIREAT``) a minute after its ``expires_at``: a janitor for a
namespace no reaper serves, never what makes a task missing.
"""

from __future__ import annotations

import bisect
import re
import secrets
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlsplit

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry as DriverRetry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import RedisError

from mcp_tasks.domain import rules
from mcp_tasks.domain.errors import (
    DuplicateInputKeys,
    DuplicateTaskId,
    EventIdReused,
    InvalidArgument,
    InvalidTransition,
    NotJSONSafe,
    OwnerTaskLimitReached,
    StaleLease,
    TaskLimitReached,
    TaskNotFound,
)
from mcp_tasks.domain.ids import new_token
from mcp_tasks.domain.jsonsafe import dumps, ensure_json, loads
from mcp_tasks.domain.models import (
    Claim,
    Claimed,
    Complete,
    Fail,
    Outcome,
    Progress,
    RecordedEvent,
    RequireInput,
    Retry,
    RevisionConflict,
    StoreOptions,
    TaskRecord,
    Transition,
    WorkSpec,
    input_digest,
)
from mcp_tasks.domain.rules import ANY_OWNER
from mcp_tasks.domain.states import TaskStatus
from mcp_tasks.stores.abilities import MigrationWords
from mcp_tasks.stores.kit import CloseGuard, DriverErrors, within
from mcp_tasks.stores.location import StoreLocation, mask_password, query_value, with_query
from mcp_tasks.stores.stats import (
    BUSIEST_OWNERS,
    StoreCounts,
    StoreStats,
    counts_of,
    from_counts,
    tally,
)
from mcp_tasks_redis import scripts
from mcp_tasks_redis.notify import driver_url, relay_notifier
from mcp_tasks_redis.provision import RedisTestServers

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    from redis.commands.core import AsyncScript

    from mcp_tasks.domain.jsonsafe import JSONObject
    from mcp_tasks.domain.models import Lease, NewTask, StatusChange
    from mcp_tasks.domain.rules import OwnerArg
    from mcp_tasks.runtime.notifier import RelayNotifier
    from mcp_tasks.stores.abilities import Rewrite

DEFAULT_PREFIX = "mcp_tasks"
SCHEMES = ("redis", "rediss", "redis+unix")
_MASK = "***"
#: redis-py's name of a scheme, where it differs from the store URL's.
_PREFIX = re.compile(r"[A-Za-z0-9_.-]{1,200}")
DRIVER_ERRORS: tuple[type[BaseException], ...] = (RedisError, OSError, TimeoutError)
#: The driver failures that surface as StoreUnavailable (the driver error as cause).
_UNAVAILABLE = DriverErrors(*DRIVER_ERRORS)
_SCRIPTS = {
    "create": scripts.CREATE,
    "read": scripts.READ,
    "put": scripts.PUT,
    "cancel": scripts.CANCEL,
    "update": scripts.UPDATE,
    "claim_one": scripts.CLAIM_ONE,
    "claim_next": scripts.CLAIM_NEXT,
    "renew": scripts.RENEW,
    "release": scripts.RELEASE,
    "reap": scripts.REAP,
    "counts": scripts.COUNTS,
    "file_statuses": scripts.FILE_STATUSES,
    "stats": scripts.STATS,
}
#: The figures the ``stats`` script counts, in the order it answers them.
_STATS_FIGURES = (
    "expiring_soon",
    "claimed",
    "lease_lapsed",
    "retry_due",
    "retry_pending",
    "waiting_unclaimed",
)
#: ``{p}:rows:counted`` once every task is filed where counts and stats read it.
FILED = scripts.FILED.encode()
#: The kind of a worker's change, as the ``put`` script names it.
_KINDS: dict[type, str] = {
    Progress: "progress",
    RequireInput: "require_input",
    Complete: "complete",
    Fail: "fail",
    Retry: "retry",
}


def _optional(text: str | None) -> str:
    """A text the scripts tell from none: ``''`` is none, ``'=' + text`` is the text."""
    return "" if text is None else "=" + text


def _caller(owner: OwnerArg) -> str:
    """The caller as the scripts' ``visible_to`` reads it."""
    return "*" if owner is ANY_OWNER else _optional(owner)  # type: ignore[arg-type]


def _nonce() -> str:
    """A fresh nonce for one store call: random (it tells nothing of any task), the same
    in every resend of the call (:mod:`mcp_tasks_redis.scripts`)."""
    return secrets.token_urlsafe(12)


def _blank(value: int | None) -> str | int:
    return "" if value is None else value


def _number(value: str) -> int | None:
    return int(value) if value else None


def _decode(text: bytes) -> TaskRecord | None:
    """The record a task's hash holds (the scripts' ``hash_json``: one JSON object of
    field → value), or None for no hash."""
    fields: dict[str, str] = loads(text)
    if not fields:
        return None
    static = loads(fields["x"])
    requests: dict[str, Any] = {}
    answers: dict[str, Any] = {}
    asked: dict[str, str] = {}
    for name, value in fields.items():
        if name[1:2] == ":":  # a per-key field: q:, i: or d:
            kind, key = name[0], name[2:]
            if kind == "q":
                requests[key] = loads(value)
            elif kind == "i":
                answers[key] = loads(value)
            else:
                asked[key] = value
    work = static["work"]
    ends = fields["ce"]
    result, error = fields.get("res"), fields.get("err")
    return TaskRecord(
        task_id=static["task_id"],
        owner=static["owner"],
        status=TaskStatus(fields["s"]),
        revision=int(fields["n"]),
        created_at=int(fields["c"]),
        last_updated_at=int(fields["u"]),
        ttl_ms=_number(fields["l"]),
        expires_at=_number(fields["e"]),
        poll_interval_ms=static["poll_interval_ms"],
        status_message=fields.get("m"),
        input_requests=requests,
        input_responses=answers,
        asked_inputs=asked,
        result=None if result is None else loads(result),
        error=None if error is None else loads(error),
        work=None if work is None else WorkSpec.from_json(work),
        attempt=int(fields["at"]),
        retry_at=_number(fields["r"]),
        generation=int(fields["g"]),
        claim=None if not ends else Claim(fields["cw"], fields["ct"], int(ends)),
        recent_events=tuple(RecordedEvent(e, f, int(r)) for e, f, r in loads(fields["ev"])),
        client_capabilities=static["client_capabilities"],
    )


#: ``rewrite_after``'s write: the payload fields set (ARGV[2] pairs from ARGV[3]) and
#: dropped (the rest) only if the revision (``n``) is still ARGV[1].
_REWRITE = """
if redis.call('HGET', KEYS[1], 'n') ~= ARGV[1] then return 0 end
local pairs = tonumber(ARGV[2])
for i = 0, pairs - 1 do redis.call('HSET', KEYS[1], ARGV[3 + 2 * i], ARGV[4 + 2 * i]) end
for i = 3 + 2 * pairs, #ARGV do redis.call('HDEL', KEYS[1], ARGV[i]) end
return 1
"""


def _payload_fields(record: TaskRecord) -> tuple[list[tuple[str, str]], list[str]]:
    """A record's payload as the hash keeps it: the fields to set, and those to drop."""
    work = record.work
    static: JSONObject = {
        "task_id": record.task_id,
        "owner": record.owner,
        "poll_interval_ms": record.poll_interval_ms,
        "work": None if work is None else work.to_json(),
        "client_capabilities": record.client_capabilities,
    }
    setting = [("x", dumps(static))]
    dropping: list[str] = []
    for name, value in (
        ("m", record.status_message),
        ("res", None if record.result is None else dumps(record.result)),
        ("err", None if record.error is None else dumps(record.error)),
    ):
        if value is None:
            dropping.append(name)
        else:
            setting.append((name, value))
    setting += [(f"q:{k}", dumps(dict(v))) for k, v in record.input_requests.items()]
    setting += [(f"i:{k}", dumps(v)) for k, v in record.input_responses.items()]
    setting += [(f"d:{k}", v) for k, v in record.asked_inputs.items()]
    return setting, dropping


#: The hash fields ``stats`` reads: what the rules it counts by look at.
_COUNTED_FIELDS = ("s", "o", "c", "u", "e", "l", "r", "ce", "w")
#: Tasks read per round trip by ``stats``.
STATS_BATCH = 500


def _counted_record(fields: list[bytes | None]) -> TaskRecord:
    """A record with the fields ``stats``' rules read (status, owner, times, TTL, retry,
    the claim's end, whether it has work) and blanks elsewhere: never a whole task."""
    status, owner, created, updated, expires, ttl, retry, ends, work = (
        None if value is None else value.decode() for value in fields
    )
    assert status is not None  # the scan found the hash: a task has these three
    assert created is not None
    assert updated is not None
    return TaskRecord(
        task_id="",
        owner=owner,
        status=TaskStatus(status),
        revision=0,
        created_at=int(created),
        last_updated_at=int(updated),
        ttl_ms=_number(ttl or ""),
        expires_at=_number(expires or ""),
        retry_at=_number(retry or ""),
        work=_COUNTED_WORK if work == "1" else None,
        claim=Claim("", "", int(ends)) if ends else None,
    )


#: The work a counted record has, when its task has any (``stats`` reads no more of it).
_COUNTED_WORK = WorkSpec("counted")


def _stored(text: bytes) -> TaskRecord:
    """The record of a hash a script has just read or written."""
    record = _decode(text)
    assert record is not None  # the scripts return a hash only for a task that exists
    return record


def _transition(reply: list[Any]) -> Transition:
    """The answer of the put, cancel and update scripts (see :mod:`scripts`) as the rules'
    Transition or error."""
    outcome = reply[0].decode()
    if outcome == "missing":
        raise TaskNotFound
    if outcome == "reused":
        raise EventIdReused
    if outcome == "claimed":
        raise StaleLease("The task is claimed by a worker; write with its lease")
    if outcome == "stale":
        raise StaleLease
    if outcome == "invalid":
        event, status = reply[1].decode(), reply[2].decode()
        raise InvalidTransition(f"'{event}' is not legal while the task is '{status}'")
    if outcome == "keys":
        raise DuplicateInputKeys(key.decode() for key in reply[1])
    record = _stored(reply[2])
    if outcome == "conflict":
        raise RevisionConflict(record)
    return Transition(record, Outcome(outcome), int(reply[1]))


def _put_args(change: StatusChange) -> list[str | int]:
    """The ``put`` script's status message, payload, error message, the call's nonce and
    input requests."""
    payload, fallback = "", None
    requests: list[str | int] = []
    match change:
        case Complete(result=result):
            payload = dumps(result)
        case Fail(error=error) | Retry(error=error):
            payload = dumps(error)
            message = error.get("message")
            fallback = str(message) if message else None
        case RequireInput(requests=asked):
            for key, request in asked.items():
                requests += [key, dumps(dict(request)), input_digest(request)]
        case Progress():
            pass
    return [_optional(change.status_message), payload, _optional(fallback), _nonce(), *requests]


def _answers(
    input_responses: Mapping[str, object],
) -> tuple[list[str | int], dict[str, NotJSONSafe]]:
    """The ``update`` script's answers (key, JSON) and, for each answer that is not
    JSON-safe, the error ``rules.apply_update`` raises if it takes that answer."""
    args: list[str | int] = []
    refused: dict[str, NotJSONSafe] = {}
    for key, value in input_responses.items():
        try:
            text = dumps(ensure_json(value, "input response"))
        except NotJSONSafe as error:
            refused[key], text = error, ""
        args += [key, text]
    return args, refused


class RedisTaskStore:
    """A :class:`~mcp_tasks.stores.protocol.Store` in Redis; ``prefix`` is its namespace."""

    def __init__(
        self,
        url: str,
        options: StoreOptions | None = None,
        *,
        prefix: str = DEFAULT_PREFIX,
        max_connections: int | None = None,
        cluster: bool = False,
        location: RedisLocation | None = None,
    ) -> None:
        if not _PREFIX.fullmatch(prefix):
            raise ValueError("prefix must be letters, digits, '_', '.' or '-'")
        if urlsplit(url).scheme.lower() not in SCHEMES:
            raise ValueError(
                "A Redis store URL looks like redis://host:6379/0 or redis+unix:///path.sock"
            )
        if cluster and urlsplit(url).scheme.lower() == "redis+unix":
            raise ValueError("A Redis Cluster is reached over TCP: redis:// or rediss://")
        self.connect_url, self.prefix, self.cluster = url, prefix, cluster
        self.options = options or StoreOptions()
        self._location = location
        self._max_connections = max_connections
        tag = "{" + prefix + "}"
        self._task_prefix = f"{tag}:t:"
        self._rows = f"{tag}:rows"
        self._ready, self._delayed = f"{tag}:ready", f"{tag}:delayed"
        self._retain, self._active = f"{tag}:retain", f"{tag}:active:"
        self._claims = f"{tag}:claim:"
        self._redis: Redis | RedisCluster | None = None
        self._scripts: dict[str, AsyncScript] = {}
        self._guard = CloseGuard()
        #: The task ids of a ``rewrite_after`` pass, sorted, as it began.
        self._rewrite_order: list[str] | None = None

    def __repr__(self) -> str:
        return f"RedisTaskStore(url={self.url!r}, max_rows={self.options.max_rows})"

    @property
    def url(self) -> str:
        """The URL that opens this store's namespace again (a password masked, also one
        given as ``?password=``, redis-py's form for unix sockets)."""
        return _shown(self.connect_url, self.prefix, self.cluster)

    @property
    def location(self) -> RedisLocation:
        """Where the store is: the location it was opened at, else its :attr:`url`."""
        if self._location is None:
            self._location = RedisStoreBackend().locate(self.url)
        return self._location

    def offer_notifier(self) -> RelayNotifier:
        """Pub/sub on the namespace's channel: it hears every process on the namespace."""
        return relay_notifier(
            self.connect_url, self.prefix, timeout_s=self.options.timeout_ms / 1000
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Release the store's connections. Idempotent."""
        self._guard.close()
        client, self._redis = self._redis, None
        if client is not None:
            with _UNAVAILABLE:
                await client.aclose()

    # --- plumbing -----------------------------------------------------------------------

    def _client(self) -> Redis | RedisCluster:
        self._guard.check()
        if self._redis is None:
            self._redis = client = _connect(
                self.connect_url,
                self.cluster,
                self._max_connections,
                timeout_s=self.options.timeout_ms / 1000,
            )
            self._scripts = {name: client.register_script(text) for name, text in _SCRIPTS.items()}
        return self._redis

    async def _run(self, script: str, keys: list[str], args: list[str | int]) -> Any:
        client = self._client()
        # The socket timeouts bound each attempt; this bounds the resends with them.
        with within(self.options.timeout_ms), _UNAVAILABLE:
            if isinstance(client, RedisCluster):
                # redis-py routes a command before it initializes the client: on a client
                # without its slot table (new, or reset after a failure) a script would go
                # to a random node. Initializing first (a no-op once done) sends it to the
                # node of its slot.
                await client.initialize()
            return await self._scripts[script](keys=keys, args=args)

    def _keys(self, task_id: str, active: str | None = None) -> list[str]:
        """The KEYS of every script (:mod:`mcp_tasks_redis.scripts`); the owner's active set
        only where the script cannot read it from the task (``create``)."""
        return [
            self._task_prefix + task_id,
            self._rows,
            self._ready,
            self._delayed,
            self._retain,
            active or self._rows,  # any key of the slot where it is not used
        ]

    def _active_key(self, owner: str | None) -> str:
        return self._active + ("n" if owner is None else "s:" + owner)

    # --- the Store operations -------------------------------------------------------------

    async def create(self, task: NewTask) -> TaskRecord:
        """One script: the id check, both caps and rules.new_record."""
        cap, per_owner = self.options.max_rows, self.options.owner_cap(task.owner)
        work = task.work
        static: JSONObject = {
            "task_id": task.task_id,
            "owner": task.owner,
            "poll_interval_ms": task.poll_interval_ms,
            "work": None if work is None else work.to_json(),
            "client_capabilities": task.client_capabilities,
        }
        args: list[str | int] = [
            task.task_id,
            _blank(cap),
            _blank(per_owner),
            dumps(static),
            _optional(task.owner),
            "" if work is None else ",".join(str(d) for d in work.retry_delays_ms),
            "0" if work is None else "1",
            _blank(task.ttl_ms),
            _optional(task.status_message),
            task.claimed_by or "",
            new_token(),
            _blank(task.lease_ms),
            _nonce(),
            "" if work is None else work.type,
        ]
        keys = self._keys(task.task_id, self._active_key(task.owner))
        reply = await self._run("create", keys, args)
        if reply == b"dup":
            raise DuplicateTaskId
        if reply == b"limit":
            raise TaskLimitReached
        if reply == b"owner_limit":
            raise OwnerTaskLimitReached
        return _stored(reply[1])

    async def get(self, task_id: str, owner: OwnerArg) -> TaskRecord:
        """One script: the hash and the server's now; rules.visible decides."""
        now, text = await self._run("read", self._keys(task_id)[:1], [])
        return rules.visible(_decode(text), owner, int(now))

    async def update(
        self, task_id: str, owner: OwnerArg, input_responses: Mapping[str, object]
    ) -> Transition:
        """One script: rules.apply_update."""
        answers, refused = _answers(input_responses)
        args = [task_id, _caller(owner), _nonce(), *answers]
        reply = await self._run("update", self._keys(task_id), args)
        if reply[0] == b"notjson":
            raise refused[reply[1].decode()]
        return _transition(reply)

    async def cancel(self, task_id: str, owner: OwnerArg) -> Transition:
        """One script: rules.apply_cancel."""
        retention = self.options.result_retention_ms
        args: list[str | int] = [task_id, _caller(owner), retention, _nonce()]
        return _transition(await self._run("cancel", self._keys(task_id), args))

    async def put_status(
        self,
        task_id: str,
        change: StatusChange,
        *,
        lease: Lease | None = None,
        expected_revision: int | None = None,
        event_id: str | None = None,
    ) -> Transition:
        """One script: rules.apply_put."""
        args: list[str | int] = [
            task_id,
            _KINDS[type(change)],
            _optional(event_id),
            "" if event_id is None else rules.fingerprint(change),
            "" if lease is None else lease.token,
            "" if lease is None else lease.generation,
            _blank(expected_revision),
            self.options.result_retention_ms,
            *_put_args(change),
        ]
        return _transition(await self._run("put", self._keys(task_id), args))

    async def claim(
        self,
        worker_id: str,
        *,
        lease_ms: int,
        task_id: str | None = None,
        work_types: rules.WorkTypes = None,
    ) -> Claimed | None:
        """One script: rules.claimable, rules.of_work_types and rules.apply_claim (the
        oldest eligible task when no id is given, through the ready sets of the types)."""
        if work_types is not None and not work_types:
            return None  # no type asked for: nothing is eligible
        token = new_token()  # also the call's nonce (scripts: a resend finds its claim)
        types = ["*"] if work_types is None else ["=", *sorted(work_types)]
        if task_id is None:
            args: list[str | int] = [self._task_prefix, worker_id, token, lease_ms, *types]
            keys = [self._claims + token, *self._keys("")[1:]]
            text = await self._run("claim_next", keys, args)
        else:
            args = [task_id, worker_id, token, lease_ms, *types]
            text = await self._run("claim_one", self._keys(task_id), args)
        if text is None:
            return None
        if text == b"bad":
            raise InvalidArgument("lease_ms must be positive")
        record = _stored(text)
        return Claimed(record, rules.lease_of(record))

    async def renew(self, lease: Lease, *, lease_ms: int) -> Lease:
        """One script: rules.apply_renew."""
        if lease_ms <= 0:
            raise InvalidArgument("lease_ms must be positive")
        args: list[str | int] = [lease.task_id, lease.token, lease.generation, lease_ms, _nonce()]
        ends = await self._run("renew", self._keys(lease.task_id), args)
        if ends == b"stale":
            raise StaleLease
        return replace(lease, expires_at=int(ends))

    async def release(self, lease: Lease) -> None:
        """One script: rules.apply_release."""
        args: list[str | int] = [lease.task_id, lease.token, lease.generation]
        await self._run("release", self._keys(lease.task_id), args)

    async def reap(self, *, limit: int = 500) -> int:
        """One script: rules.is_reapable, at most ``limit`` tasks."""
        self._client()
        if limit <= 0:
            return 0
        args: list[str | int] = [self._task_prefix, self.options.terminal_retention_ms, limit]
        return int(await self._run("reap", self._keys(""), args))

    async def stats(self) -> StoreStats:
        """Aggregates of the namespace's tasks for ``mcp-tasks stats``, in one script
        (:data:`scripts.STATS`) that counts from the sets every write keeps (``ZCOUNT``s,
        O(log n) each) and reads only the tasks whose figure moves with the clock alone:
        lapsed leases, due retries, and the tasks past their TTL the reaper has not deleted
        yet; so it costs what those do, not what the table holds. Exact at the server's
        now, the rules of :func:`mcp_tasks.stores.stats.tally` restated per figure. A
        namespace written before the sets existed is walked whole (``tally``) until
        ``migrate`` has filed it. Writes nothing."""
        found = await self._run(
            "stats",
            self._keys("")[:3],
            [
                self._task_prefix,
                rules.EXPIRY_HORIZON_MS,
                rules.UNCLAIMED_AFTER_MS,
                BUSIEST_OWNERS,
            ],
        )
        now, rows = int(found[0]), int(found[1])
        if found[2] != FILED and rows:
            return tally(await self._walk(), now, self.options)
        figures: dict[str, Any] = {"rows": rows}
        figures.update(
            {
                f"status_{status.value}": int(n)
                for status, n in zip(TaskStatus, found[3:8], strict=True)
            }
        )
        figures.update({name: int(n) for name, n in zip(_STATS_FIGURES, found[8:14], strict=True)})
        oldest = found[14]
        figures["oldest_working_created_at"] = int(oldest) if oldest else None
        return from_counts(
            figures,
            now=now,
            owners=int(found[15]),
            busiest_owners=[int(n) for n in found[16:]],
            options=self.options,
        )

    async def _walk(self) -> list[TaskRecord]:
        """Every task as far as ``stats`` reads them (:func:`_counted_record`)."""
        client = self._client()
        records: list[TaskRecord] = []
        with _UNAVAILABLE:
            async for batch in self._batches(client.zscan_iter(self._rows, count=STATS_BATCH)):
                records += await self._counted(client, batch)
        return records

    @staticmethod
    async def _batches(members: AsyncIterator[tuple[bytes, float]]) -> AsyncIterator[list[bytes]]:
        """The members of a ``ZSCAN``, :data:`STATS_BATCH` at a time."""
        batch: list[bytes] = []
        async for member, _ in members:
            batch.append(member)
            if len(batch) == STATS_BATCH:
                yield batch
                batch = []
        if batch:
            yield batch

    async def counts(self) -> StoreCounts:
        """Rows and unexpired tasks per status (the store gauges), in one script that reads
        no task: ``ZCARD`` of ``{p}:rows`` and a ``ZCOUNT`` of each status's set
        (``{p}:rows:<status>``, by ``expires_at``), which every write keeps in the same
        script as the task. O(log n) per status; exact at the server's now, a task past its
        TTL leaving its status's count at that instant, with no write. A namespace written
        before the status sets existed is counted by :meth:`stats` until
        :meth:`migrate` has filed its tasks."""
        found = await self._run("counts", self._keys("")[:2], [])
        now, rows, counted = int(found[0]), int(found[1]), found[2]
        if counted != FILED and rows:
            return counts_of(await self.stats())
        by_status = {status: int(n) for status, n in zip(TaskStatus, found[3:], strict=True)}
        return StoreCounts(now=now, rows=rows, by_status=by_status, max_rows=self.options.max_rows)

    #: What :meth:`migrate` makes, for ``mcp-tasks migrate`` and ``doctor``.
    migration = MigrationWords(
        done="counted the tasks written before the counts (filed each in its status's set)",
        current="every task was already counted; nothing changed",
        capability="keeps counts of its tasks by status; `mcp-tasks migrate` counts the "
        "tasks written before them (Redis keeps no schema)",
    )

    async def migrate(self) -> bool:
        """File every task in the sets the counts and stats read (its status's set, the
        leases, retries, working and owner sets: :meth:`counts`, :meth:`stats`), once: a walk
        of ``{p}:rows``, :data:`STATS_BATCH` tasks a script; writes meanwhile file their own
        tasks. Whether it filed tasks written before (``False``: the sets were complete, or
        the namespace had no task: then it only marks them complete)."""
        found = await self._run("counts", self._keys("")[:2], [])
        if found[2] == FILED:
            return False
        if not int(found[1]):
            await self._run("file_statuses", self._keys(""), [""])
            return False
        client = self._client()
        with _UNAVAILABLE:
            batch: list[str | int] = []
            async for member, _ in client.zscan_iter(self._rows, count=STATS_BATCH):
                batch.append(member.decode())
                if len(batch) == STATS_BATCH:
                    await self._file_statuses(batch)
                    batch = []
        await self._file_statuses(batch)
        await self._run("file_statuses", self._keys(""), [""])
        return True

    async def _file_statuses(self, task_ids: list[str | int]) -> None:
        if task_ids:
            await self._run("file_statuses", self._keys(""), [self._task_prefix, *task_ids])

    async def rewrite_after(self, after: str | None, rewrite: Rewrite) -> str | None:
        """The next task by id rewritten in place (``Rewrites``): read it (the ``read``
        script), let ``rewrite`` compute the payload (``rules.rewritten``), and set its
        payload fields in one script only if its revision is unchanged (the fields a
        rewrite sets change only with the revision; a claim touches none of them); on a
        lost race, read it again. The ids are the row index's as the pass began
        (``after=None``): a task created since then is left out."""
        if after is None or self._rewrite_order is None:
            client = self._client()
            with _UNAVAILABLE:
                members = [m async for m, _ in client.zscan_iter(self._rows, count=STATS_BATCH)]
            self._rewrite_order = sorted({m.decode() for m in members})
        order = self._rewrite_order
        place = bisect.bisect_right(order, after) if after is not None else 0
        if place >= len(order):
            return None
        task_id = order[place]
        while True:
            _, text = await self._run("read", self._keys(task_id)[:1], [])
            record = _decode(text)
            written = None if record is None else rules.rewritten(record, rewrite(record))
            if record is None or written is None:
                return task_id
            setting, dropping = _payload_fields(written)
            args: list[str | int] = [record.revision, len(setting)]
            args += [part for pair in setting for part in pair]
            args += dropping
            with within(self.options.timeout_ms), _UNAVAILABLE:
                done = await self._client().eval(_REWRITE, 1, self._task_prefix + task_id, *args)
            if done == 1:
                return task_id

    async def _counted(
        self, client: Redis | RedisCluster, task_ids: list[bytes]
    ) -> list[TaskRecord]:
        """The tasks' records as far as ``stats`` reads them (:func:`_counted_record`);
        a task deleted since the scan found it is left out."""
        if not task_ids:
            return []
        pipe = client.pipeline(transaction=False)
        for task_id in task_ids:
            pipe.hmget(self._task_prefix + task_id.decode(), *_COUNTED_FIELDS)
        found: list[list[bytes | None]] = await pipe.execute()
        return [_counted_record(fields) for fields in found if fields[0] is not None]

    async def diagnose(self) -> list[tuple[str, str, str]]:
        """`mcp-tasks doctor`'s Redis checks (:mod:`mcp_tasks_redis.server_checks`); on a cluster,
        of the node that serves this namespace's slot (its settings and keys are the ones
        that matter)."""
        from mcp_tasks_redis import server_checks  # noqa: PLC0415 - only doctor needs it

        client = self._client()
        if not isinstance(client, RedisCluster):
            return await server_checks.diagnose(client, self.prefix)
        with _UNAVAILABLE:
            await client.initialize()
            node = client.get_node_from_key(self._rows)
        if node is None:
            return [("redis", "fail", "no node of the cluster serves this namespace's slot")]
        plain = Redis.from_url(_node_url(self.connect_url, node.host, node.port))
        try:
            return await server_checks.diagnose(plain, self.prefix)
        finally:
            await plain.aclose()


def _connect(
    url: str, cluster: bool, max_connections: int | None, *, timeout_s: float | None = None
) -> Redis | RedisCluster:
    """A client of a server, or of a cluster (a cluster client follows the slot of each
    script's keys to its node; a namespace is one slot).

    Both resend a command after a connection error or timeout, on a new connection, up to
    :data:`RESENDS` times (:func:`_retry`): also a script the server had already run when
    the connection broke, which the scripts recognise by their call's nonce and answer as
    their first run did (:mod:`mcp_tasks_redis.scripts`). ``MOVED``, ``ASK`` and
    ``TRYAGAIN`` are followed as ever (a node that answers them has not run the script).

    The cluster client is also told ``reinitialize_steps=0``: on every fifth ``MOVED``
    redis-py would close every connection of the client, also those other calls are
    waiting on, which makes those calls fail (or be resent). ``MOVED`` then only patches
    the slot it names.

    ``timeout_s`` (the store's bound) is each connect's and each command's socket timeout.
    """
    timeouts: dict[str, Any] = {"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s}
    if not cluster:
        # A blocking pool: past its size an operation waits for a free connection (within
        # the bound) instead of failing at once, as redis-py's default pool does.
        pool = BlockingConnectionPool.from_url(
            driver_url(url),
            max_connections=max_connections or DEFAULT_MAX_CONNECTIONS,
            timeout=timeout_s,
            retry=_retry(),
            **timeouts,
        )
        return Redis.from_pool(pool)
    options: dict[str, Any] = {"retry": _retry(), "reinitialize_steps": 0, **timeouts}
    if max_connections is not None:  # else the cluster client's own default (per node)
        options["max_connections"] = max_connections
    return RedisCluster.from_url(driver_url(url), **options)


#: How many times a client sends a command again after a connection error or timeout.
RESENDS = 3

#: The single-server client's pool size when ``max_connections`` is not given (redis-py's).
DEFAULT_MAX_CONNECTIONS = 100


def _retry() -> DriverRetry:
    """The one resend policy of both clients: :data:`RESENDS` resends after a connection
    error or timeout; the single-server client waits 10 ms to 1 s with jitter before each
    (redis-py's own backoff), the cluster client reloads its slot table instead."""
    return DriverRetry(ExponentialWithJitterBackoff(base=0.01, cap=1.0), retries=RESENDS)


async def _drop(connect_url: str, prefix: str, cluster: bool) -> None:
    """Delete every key of namespace ``prefix`` (SCAN over its own hash tag, on every node
    of a cluster: never on a request path, only for tests and ``drop_namespace``)."""
    pattern = "{" + prefix + "}:*"
    with _UNAVAILABLE:
        client = _connect(connect_url, cluster, None)
        try:
            batch: list[Any] = []
            async for key in client.scan_iter(match=pattern, count=1000):
                batch.append(key)
                if len(batch) >= 500:
                    await client.unlink(*batch)
                    batch = []
            if batch:
                await client.unlink(*batch)
        finally:
            await client.aclose()


def _node_url(url: str, host: str, port: object) -> str:
    """``url`` (its credentials, database and options) pointed at one node of a cluster."""
    parts = urlsplit(url)
    userinfo, _, _ = parts.netloc.rpartition("@")
    address = f"{host}:{port}"
    return driver_url(
        parts._replace(netloc=f"{userinfo}@{address}" if userinfo else address).geturl()
    )


class RedisStoreBackend(RedisTestServers):
    """Opens ``redis://[user:password@]host:6379/0`` (or ``rediss://`` for TLS, or
    ``redis+unix:///path/redis.sock?db=0`` for a unix socket); ``?prefix=NAME`` picks the
    namespace, the hash tag of every key (default ``mcp_tasks``); ``?cluster=1`` reaches a
    Redis Cluster through any of its nodes; ``?timeout_ms=`` is the store's bound on waiting
    (``StoreOptions.timeout_ms``)."""

    def locate(self, url: str, /) -> RedisLocation:
        location = StoreLocation.read(url)
        if location.scheme not in SCHEMES:
            raise ValueError("A Redis store URL looks like redis://host:6379/0?prefix=NAME")
        prefix = location.value("prefix") or DEFAULT_PREFIX
        if not _PREFIX.fullmatch(prefix):
            raise ValueError("A Redis store's ?prefix= is letters, digits, '_', '.' or '-'")
        cluster = location.value("cluster")
        if cluster not in (None, "0", "1", "true", "false"):
            raise ValueError("A Redis store's ?cluster= is 1 or 0")
        connect_url = location.stripped("prefix", "cluster")
        is_cluster = cluster in ("1", "true")
        return location.specialised(
            RedisLocation,
            namespace=prefix,
            masked=_shown(connect_url, prefix, is_cluster),
            password=location.password or location.value("password"),
            connect_url=connect_url,
            prefix=prefix,
            cluster=is_cluster,
        )

    def open(self, location: RedisLocation, options: StoreOptions, /) -> RedisTaskStore:
        return RedisTaskStore(
            location.connect_url,
            options,
            prefix=location.prefix,
            cluster=location.cluster,
            location=location,
        )

    def namespaced(self, location: RedisLocation, namespace: str, /) -> RedisLocation:
        return self.locate(with_query(location.url, prefix=namespace))

    async def drop(self, location: RedisLocation, /) -> None:
        await _drop(location.connect_url, location.prefix, location.cluster)


@dataclass(frozen=True, kw_only=True, repr=False)
class RedisLocation(StoreLocation):
    """A ``redis://`` URL read: what redis-py connects to, the key prefix (the namespace)
    and whether it is a cluster's."""

    connect_url: str
    prefix: str
    cluster: bool


def _shown(connect_url: str, prefix: str, cluster: bool) -> str:
    """The URL that opens namespace ``prefix`` again, password masked (also one given as
    ``?password=``, redis-py's form for unix sockets)."""
    url = with_query(connect_url, prefix=prefix)
    if cluster:
        url = with_query(url, cluster="1")
    if query_value(url, "password") is not None:
        masked = {"password": _MASK, "prefix": None}
        url = with_query(url, **masked)
        url = with_query(url, prefix=prefix).replace("password=%2A%2A%2A", "password=***")
    return mask_password(url)


def from_url(url: str, options: StoreOptions | None = None) -> RedisTaskStore:
    """The store ``url`` names (see :class:`RedisStoreBackend`)."""
    location = backend.locate(url)
    return backend.open(location, location.options(options))


#: The ``redis``, ``rediss`` and ``redis+unix`` entry points of the ``mcp_tasks.stores`` group.
backend = RedisStoreBackend()
