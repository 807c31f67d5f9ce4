"""The Redis Store: one JSON document per task, sorted sets as indexes, Lua for atomicity.

Keys of one namespace (``prefix``) all share the hash tag ``{prefix}``, so a namespace lives
in one cluster slot and every script touches one slot:

* ``{p}:t:<task id>`` — a hash: ``d`` the record (:func:`mcp_tasks.stores.codec.record_to_json`),
  ``v`` its version (from the namespace counter ``{p}:seq``, so a reaped and re-created id
  never reuses one), ``a`` the key of the owner's active set, and the fields a claim reads
  and writes (``_FIELD_NAMES``: times, generation, the claim), which override the doc's;
* ``{p}:rows`` — every task by ``expires_at`` (``+inf`` without TTL): the row cap counts
  the unexpired ones, ``reap`` takes the expired ones;
* ``{p}:active:n`` / ``{p}:active:s:<owner>`` — one owner's live tasks by ``expires_at``:
  the per-owner cap;
* ``{p}:ready`` — live tasks with work, no claim and no pending retry, by ``created_at``
  (members of one score sort by id: exactly ``rules.claim_order``);
* ``{p}:delayed`` — live tasks with work waiting for a time (their claim's end or
  ``retry_at``), by that time; a claim moves the due ones into ``ready``;
* ``{p}:retain`` — terminal tasks without TTL by ``last_updated_at`` (``S-REAP``).

Time is the server's (``TIME`` inside the scripts). ``create`` (id check, row cap,
per-owner cap, insert), ``claim`` (by id, or the oldest eligible task), ``renew``,
``release`` (``rules.claimable``, ``apply_claim``, ``apply_renew`` and ``apply_release``
restated in Lua on the hash fields) and ``reap`` are one script each. ``update``,
``cancel`` and ``put_status`` are optimistic: one script reads the record, its version
and the server's now; the shared rules (:mod:`mcp_tasks.domain.rules`) compute the write;
one script applies it (record and indexes) only if the version is unchanged, else the
store reads again. Scripts run by SHA; redis-py loads them again on ``NOSCRIPT``.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Self, TypeVar
from urllib.parse import urlsplit

from redis.asyncio import Redis
from redis.exceptions import RedisError

from mcp_tasks.domain import rules
from mcp_tasks.domain.errors import (
    DuplicateTaskId,
    InvalidArgument,
    MCPTasksError,
    StaleLease,
    StoreUnavailable,
    TaskLimitReached,
)
from mcp_tasks.domain.ids import new_token
from mcp_tasks.domain.jsonsafe import dumps, loads
from mcp_tasks.domain.models import Claim, Claimed, Lease, StoreOptions, Transition
from mcp_tasks.domain.states import Event, next_status
from mcp_tasks.stores.codec import record_from_json, record_to_json
from mcp_tasks.stores.opening import mask_password, query_value, with_query

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from redis.commands.core import AsyncScript

    from mcp_tasks.domain.models import NewTask, StatusChange, TaskRecord
    from mcp_tasks.domain.rules import OwnerArg

R = TypeVar("R")

DEFAULT_PREFIX = "mcp_tasks"
SCHEMES = ("redis", "rediss", "redis+unix")
_MASK = "***"
#: redis-py's name of a scheme, where it differs from the store URL's.
_DRIVER_SCHEMES = {"redis+unix": "unix"}
_PREFIX = re.compile(r"[A-Za-z0-9_.-]{1,200}")
DRIVER_ERRORS: tuple[type[BaseException], ...] = (RedisError, OSError, TimeoutError)

# --- the scripts ------------------------------------------------------------------------

_COMMON = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function ms(n) return string.format('%d', n) end
-- KEYS: 1 task, 2 seq, 3 rows, 4 active (the owner's), 5 ready, 6 delayed, 7 retain
-- f (9 strings): the fields a claim reads and writes (_FIELD_NAMES)
-- idx (5 strings): rows score; active, ready, delayed, retain scores ('' = not a member)
local function put(id, doc, f, idx)
  local v = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], 'd', doc, 'v', v, 'a', KEYS[4], 'c', f[1], 'e', f[2], 'l', f[3],
    'k', f[4], 'r', f[5], 'g', f[6], 'cw', f[7], 'ct', f[8], 'ce', f[9])
  redis.call('ZADD', KEYS[3], idx[1], id)
  for i = 2, 5 do
    if idx[i] == '' then
      redis.call('ZREM', KEYS[i + 2], id)
    else
      redis.call('ZADD', KEYS[i + 2], idx[i], id)
    end
  end
  return v
end
"""

# The hash fields a claim reads and writes besides the doc (they override the doc's values
# of the same record fields): c created_at, e expires_at, l ttl_ms, k claimable status with
# work ('1'/'0'), r retry_at, g generation, cw/ct/ce the claim's worker, token and end.
_FIELD_NAMES = ("c", "e", "l", "k", "r", "g", "cw", "ct", "ce")

# ARGV: id, max_rows, max_active_per_owner, doc, fields x9, idx x5
_CREATE = (
    _COMMON
    + """
if redis.call('EXISTS', KEYS[1]) == 1 then return 'dup' end
local now = ms(now_ms())
if ARGV[2] ~= '' and redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf') >= tonumber(ARGV[2]) then
  return 'limit'
end
if ARGV[3] ~= '' and redis.call('ZCOUNT', KEYS[4], '(' .. now, '+inf') >= tonumber(ARGV[3]) then
  return 'limit'
end
put(ARGV[1], ARGV[4], {unpack(ARGV, 5, 13)}, {unpack(ARGV, 14, 18)})
return 'ok'
"""
)

# ARGV: id, expected version, doc, fields x9, idx x5 → 1 written, 0 lost race
_WRITE = (
    _COMMON
    + """
if redis.call('HGET', KEYS[1], 'v') ~= ARGV[2] then return 0 end
put(ARGV[1], ARGV[3], {unpack(ARGV, 4, 12)}, {unpack(ARGV, 13, 17)})
return 1
"""
)

_STORED = "'v', 'd', 'c', 'e', 'l', 'k', 'r', 'g', 'cw', 'ct', 'ce'"

# KEYS: task → {now, version, doc, fields x9} (all nil when there is no such task)
_READ = (
    _COMMON
    + f"""
local f = redis.call('HMGET', KEYS[1], {_STORED})
table.insert(f, 1, now_ms())
return f
"""
)

# rules.claimable and rules.apply_claim, on the hash fields: the task at ``key`` is
# claimed for ``worker`` with ``token`` if eligible at ``now`` → its stored fields after the
# claim ({now, version, doc, fields x9}); 'bad' (nothing written) for a non-positive lease;
# nil when it is not eligible. KEYS: 2 seq, 3 rows, 5 ready, 6 delayed.
_CLAIM_FUNCTION = f"""
local function claim(key, id, now, worker, token, lease)
  local f = redis.call('HMGET', key, 'k', 'c', 'e', 'r', 'ce', 'g', 'a')
  if f[1] ~= '1' then return nil end
  if f[3] ~= '' and tonumber(f[3]) <= now then return nil end
  if f[4] ~= '' and tonumber(f[4]) > now then return nil end
  if f[5] ~= '' and tonumber(f[5]) > now then return nil end
  if lease <= 0 then return 'bad' end
  local ends = now + lease
  local e = f[3]
  if e ~= '' and tonumber(e) < ends then
    e = ms(ends)
    redis.call('HSET', key, 'e', e, 'l', ms(ends - tonumber(f[2])))
    redis.call('ZADD', KEYS[3], e, id)
    redis.call('ZADD', f[7], e, id)
  end
  local v = redis.call('INCR', KEYS[2])
  redis.call('HSET', key, 'v', v, 'g', tonumber(f[6]) + 1, 'cw', worker, 'ct', token,
    'ce', ms(ends), 'r', '')
  redis.call('ZREM', KEYS[5], id)
  redis.call('ZADD', KEYS[6], ms(ends), id)
  local stored = redis.call('HMGET', key, {_STORED})
  table.insert(stored, 1, now)
  return stored
end
"""

# KEYS: 1 task, 2 seq, 3 rows, 4 (unused), 5 ready, 6 delayed; ARGV: id, worker, token,
# lease_ms
_CLAIM_ONE = (
    _COMMON
    + _CLAIM_FUNCTION
    + """
return claim(KEYS[1], ARGV[1], now_ms(), ARGV[2], ARGV[3], tonumber(ARGV[4]))
"""
)

# The oldest claimable task (rules.claim_order: ready is ordered by created_at, then id),
# claimed. Due delayed tasks move to ready first; expired ones leave it for good (no write
# revives an expired task). KEYS as _CLAIM_ONE; ARGV: task key prefix, worker, token, lease_ms
_CLAIM_NEXT = (
    _COMMON
    + _CLAIM_FUNCTION
    + """
local now = now_ms()
local due = redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', ms(now))
for _, id in ipairs(due) do
  redis.call('ZREM', KEYS[6], id)
  local c = redis.call('HGET', ARGV[1] .. id, 'c')
  if c then redis.call('ZADD', KEYS[5], c, id) end
end
while true do
  local head = redis.call('ZRANGE', KEYS[5], 0, 0)
  if #head == 0 then return nil end
  local id = head[1]
  local claimed = claim(ARGV[1] .. id, id, now, ARGV[2], ARGV[3], tonumber(ARGV[4]))
  if claimed then return claimed end
  redis.call('ZREM', KEYS[5], id)
end
"""
)

# rules.apply_renew on the hash fields (the caller has refused a non-positive lease):
# 'stale' (nothing written) or {now, the claim's new end}. KEYS as _CLAIM_ONE; ARGV: id,
# token, generation, lease_ms
_RENEW = (
    _COMMON
    + """
local now = now_ms()
local f = redis.call('HMGET', KEYS[1], 'k', 'c', 'e', 'ce', 'ct', 'g', 'a')
if f[1] ~= '1' then return 'stale' end
if f[3] ~= '' and tonumber(f[3]) <= now then return 'stale' end
if f[4] == '' or tonumber(f[4]) <= now or f[5] ~= ARGV[2] or f[6] ~= ARGV[3] then
  return 'stale'
end
local ends = now + tonumber(ARGV[4])
local e = f[3]
if e ~= '' and tonumber(e) < ends then
  e = ms(ends)
  redis.call('HSET', KEYS[1], 'e', e, 'l', ms(ends - tonumber(f[2])))
  redis.call('ZADD', KEYS[3], e, ARGV[1])
  redis.call('ZADD', f[7], e, ARGV[1])
end
redis.call('HSET', KEYS[1], 'v', redis.call('INCR', KEYS[2]), 'ce', ms(ends))
redis.call('ZADD', KEYS[6], ms(ends), ARGV[1])
return {now, ms(ends)}
"""
)

# rules.apply_release on the hash fields: the claim freed if the lease is the task's (its
# token and generation; expired or not), else nothing. KEYS as _CLAIM_ONE; ARGV: id,
# token, generation
_RELEASE = (
    _COMMON
    + """
local f = redis.call('HMGET', KEYS[1], 'k', 'c', 'r', 'ce', 'ct', 'g')
if not f[1] or f[4] == '' or f[5] ~= ARGV[2] or f[6] ~= ARGV[3] then return 0 end
redis.call('HSET', KEYS[1], 'v', redis.call('INCR', KEYS[2]), 'cw', '', 'ct', '', 'ce', '')
redis.call('ZREM', KEYS[6], ARGV[1])
if f[1] == '1' then
  if f[3] ~= '' then
    redis.call('ZADD', KEYS[6], f[3], ARGV[1])
  else
    redis.call('ZADD', KEYS[5], f[2], ARGV[1])
  end
end
return 1
"""
)

# KEYS: rows, retain, ready, delayed; ARGV: task key prefix, terminal retention, limit
_REAP = (
    _COMMON
    + """
local now = now_ms()
local limit = tonumber(ARGV[3])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ms(now), 'LIMIT', 0, limit)
if #ids < limit then
  local old = ms(now - tonumber(ARGV[2]))
  local more = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', old, 'LIMIT', 0, limit - #ids)
  for _, id in ipairs(more) do table.insert(ids, id) end
end
for _, id in ipairs(ids) do
  local key = ARGV[1] .. id
  local active = redis.call('HGET', key, 'a')
  if active then redis.call('ZREM', active, id) end
  redis.call('DEL', key)
  for i = 1, 4 do redis.call('ZREM', KEYS[i], id) end
end
return #ids
"""
)


@contextmanager
def _driver_errors() -> Iterator[None]:
    """Driver failures surface as StoreUnavailable with the driver error as cause."""
    try:
        yield
    except MCPTasksError:
        raise
    except DRIVER_ERRORS as exc:
        raise StoreUnavailable from exc


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _score(value: int | None) -> str:
    return "+inf" if value is None else str(value)


def _encode(record: TaskRecord) -> list[str | int]:
    """The doc and the fields of _FIELD_NAMES, as the write scripts store them."""
    claim = record.claim
    return [
        dumps(record_to_json(record)),
        record.created_at,
        _blank(record.expires_at),
        _blank(record.ttl_ms),
        "1" if record.work is not None and next_status(record.status, Event.CLAIM) else "0",
        _blank(record.retry_at),
        record.generation,
        "" if claim is None else claim.worker_id,
        "" if claim is None else claim.token,
        "" if claim is None else claim.expires_at,
    ]


def _decode(stored: list[Any]) -> tuple[TaskRecord | None, str | None]:
    """The record and its version from ``version, doc, fields x9`` (the doc's values of the
    fields a claim writes are overridden by the fields)."""
    version, doc, _created, expires, ttl, _claimable, retry, generation, *claim = stored
    if version is None:
        return None, None
    worker, token, ends = (_text(part) for part in claim)
    record = replace(
        record_from_json(loads(doc)),
        expires_at=_number(expires),
        ttl_ms=_number(ttl),
        retry_at=_number(retry),
        generation=int(generation),
        claim=Claim(worker, token, int(ends)) if ends else None,
    )
    return record, _text(version)


def _blank(value: int | None) -> str | int:
    return "" if value is None else value


def _number(value: bytes) -> int | None:
    return int(value) if value else None


def _index(record: TaskRecord) -> list[str]:
    """The five index scores of ``record`` (see the module docstring; '' = not a member)."""
    terminal = record.status.is_terminal
    rows = _score(record.expires_at)
    ready = delayed = ""
    if record.work is not None and next_status(record.status, Event.CLAIM) is not None:
        claim_end = None if record.claim is None else record.claim.expires_at
        waits = [t for t in (record.retry_at, claim_end) if t is not None]
        if waits:
            delayed = str(max(waits))
        else:
            ready = str(record.created_at)
    retain = str(record.last_updated_at) if terminal and record.ttl_ms is None else ""
    return [rows, "" if terminal else rows, ready, delayed, retain]


class RedisTaskStore:
    """A :class:`~mcp_tasks.stores.protocol.Store` in Redis; ``prefix`` is its namespace."""

    def __init__(
        self,
        url: str,
        options: StoreOptions | None = None,
        *,
        prefix: str = DEFAULT_PREFIX,
        max_connections: int | None = None,
    ) -> None:
        if not _PREFIX.fullmatch(prefix):
            raise ValueError("prefix must be letters, digits, '_', '.' or '-'")
        if urlsplit(url).scheme.lower() not in SCHEMES:
            raise ValueError(
                "A Redis store URL looks like redis://host:6379/0 or redis+unix:///path.sock"
            )
        self.connect_url, self.prefix = url, prefix
        self.options = options or StoreOptions()
        self._max_connections = max_connections
        tag = "{" + prefix + "}"
        self._task_prefix = f"{tag}:t:"
        self._seq, self._rows = f"{tag}:seq", f"{tag}:rows"
        self._ready, self._delayed = f"{tag}:ready", f"{tag}:delayed"
        self._retain, self._active = f"{tag}:retain", f"{tag}:active:"
        self._redis: Redis | None = None
        self._scripts: dict[str, AsyncScript] = {}
        self._closed = False

    def __repr__(self) -> str:
        return f"RedisTaskStore(url={self.url!r}, max_rows={self.options.max_rows})"

    @property
    def url(self) -> str:
        """The URL that opens this store's namespace again (a password masked, also one
        given as ``?password=``, redis-py's form for unix sockets)."""
        url = with_query(self.connect_url, prefix=self.prefix)
        if query_value(url, "password") is not None:
            masked = {"password": _MASK, "prefix": None}
            url = with_query(url, **masked)
            url = with_query(url, prefix=self.prefix).replace("password=%2A%2A%2A", "password=***")
        return mask_password(url)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Release the store's connections. Idempotent."""
        self._closed = True
        client, self._redis = self._redis, None
        if client is not None:
            with _driver_errors():
                await client.aclose()

    # --- plumbing -----------------------------------------------------------------------

    def _client(self) -> Redis:
        if self._closed:
            raise StoreUnavailable("The store is closed")
        if self._redis is None:
            self._redis = Redis.from_url(
                _driver_url(self.connect_url),
                decode_responses=False,
                max_connections=self._max_connections,
            )
            client = self._redis
            self._scripts = {
                name: client.register_script(text)
                for name, text in (
                    ("create", _CREATE),
                    ("write", _WRITE),
                    ("read", _READ),
                    ("claim_one", _CLAIM_ONE),
                    ("claim_next", _CLAIM_NEXT),
                    ("renew", _RENEW),
                    ("release", _RELEASE),
                    ("reap", _REAP),
                )
            }
        return self._redis

    async def _run(self, script: str, keys: list[str], args: list[str | int]) -> Any:
        self._client()
        with _driver_errors():
            return await self._scripts[script](keys=keys, args=args)

    def _task_key(self, task_id: str) -> str:
        return self._task_prefix + task_id

    def _active_key(self, owner: str | None) -> str:
        return self._active + ("n" if owner is None else "s:" + owner)

    def _keys(self, record: TaskRecord) -> list[str]:
        return [
            self._task_key(record.task_id),
            self._seq,
            self._rows,
            self._active_key(record.owner),
            self._ready,
            self._delayed,
            self._retain,
        ]

    async def _read(self, task_id: str) -> tuple[TaskRecord | None, str | None, int]:
        stored = await self._run("read", [self._task_key(task_id)], [])
        record, version = _decode(stored[1:])
        return record, version, int(stored[0])

    async def _write(self, record: TaskRecord, version: str) -> bool:
        args: list[str | int] = [record.task_id, version, *_encode(record), *_index(record)]
        return bool(await self._run("write", self._keys(record), args))

    async def _modify(
        self, task_id: str, compute: Callable[[TaskRecord | None, int], tuple[R, TaskRecord | None]]
    ) -> R:
        """Read the record and the server's now, let the rules compute the write, persist it
        only if the version is unchanged; on a lost race, read again."""
        while True:
            record, version, now = await self._read(task_id)
            result, write = compute(record, now)
            if write is None:
                return result
            assert version is not None  # the rules write only a record that exists
            if await self._write(write, version):
                return result

    # --- the Store operations -------------------------------------------------------------

    async def create(self, task: NewTask) -> TaskRecord:
        client = self._client()
        with _driver_errors():
            seconds, micros = await client.time()
        record = rules.new_record(task, int(seconds) * 1000 + int(micros) // 1000)
        cap, per_owner = self.options.max_rows, self.options.max_active_per_owner
        args: list[str | int] = [
            task.task_id,
            "" if cap is None else cap,
            "" if per_owner is None else per_owner,
            *_encode(record),
            *_index(record),
        ]
        answer = _text(await self._run("create", self._keys(record), args))
        if answer == "dup":
            raise DuplicateTaskId
        if answer == "limit":
            raise TaskLimitReached
        return record

    async def get(self, task_id: str, owner: OwnerArg) -> TaskRecord:
        record, _, now = await self._read(task_id)
        return rules.visible(record, owner, now)

    async def update(
        self, task_id: str, owner: OwnerArg, input_responses: Mapping[str, object]
    ) -> Transition:
        return await self._modify(task_id, rules.update_write(owner, input_responses))

    async def cancel(self, task_id: str, owner: OwnerArg) -> Transition:
        retention = self.options.result_retention_ms
        return await self._modify(task_id, rules.cancel_write(owner, result_retention_ms=retention))

    async def put_status(
        self,
        task_id: str,
        change: StatusChange,
        *,
        lease: Lease | None = None,
        expected_revision: int | None = None,
        event_id: str | None = None,
    ) -> Transition:
        write = rules.put_write(
            change,
            result_retention_ms=self.options.result_retention_ms,
            lease=lease,
            expected_revision=expected_revision,
            event_id=event_id,
        )
        return await self._modify(task_id, write)

    async def claim(
        self, worker_id: str, *, lease_ms: int, task_id: str | None = None
    ) -> Claimed | None:
        """One script: rules.claimable and rules.apply_claim on the stored fields (the
        oldest eligible task when no id is given, through the ready set)."""
        token = new_token()
        keys = self._claim_keys(task_id or "")
        if task_id is None:
            args: list[str | int] = [self._task_prefix, worker_id, token, lease_ms]
            stored = await self._run("claim_next", keys, args)
        else:
            stored = await self._run("claim_one", keys, [task_id, worker_id, token, lease_ms])
        if stored is None:
            return None
        if stored == b"bad":
            raise InvalidArgument("lease_ms must be positive")
        record, _ = _decode(stored[1:])
        assert record is not None
        return Claimed(record, rules.lease_of(record))

    def _claim_keys(self, task_id: str) -> list[str]:
        """The KEYS of the claim, renew and release scripts (KEYS[4] is not used by them:
        it is the owner's active set elsewhere, so any key of the slot)."""
        key = self._task_key(task_id)
        return [key, self._seq, self._rows, self._seq, self._ready, self._delayed]

    async def renew(self, lease: Lease, *, lease_ms: int) -> Lease:
        """One script: rules.apply_renew on the stored fields."""
        if lease_ms <= 0:
            raise InvalidArgument("lease_ms must be positive")
        args: list[str | int] = [lease.task_id, lease.token, lease.generation, lease_ms]
        renewed = await self._run("renew", self._claim_keys(lease.task_id), args)
        if renewed == b"stale":
            raise StaleLease
        return replace(lease, expires_at=int(renewed[1]))

    async def release(self, lease: Lease) -> None:
        """One script: rules.apply_release on the stored fields."""
        args: list[str | int] = [lease.task_id, lease.token, lease.generation]
        await self._run("release", self._claim_keys(lease.task_id), args)

    async def reap(self, *, limit: int = 500) -> int:
        self._client()
        if limit <= 0:
            return 0
        keys = [self._rows, self._retain, self._ready, self._delayed]
        args: list[str | int] = [
            self._task_prefix,
            self.options.terminal_retention_ms,
            limit,
        ]
        return int(await self._run("reap", keys, args))

    async def diagnose(self) -> list[tuple[str, str, str]]:
        """`mcp-tasks doctor`'s Redis checks (:mod:`mcp_tasks_redis.doctor`)."""
        from mcp_tasks_redis import doctor  # noqa: PLC0415 - only doctor needs it

        return await doctor.diagnose(self._client(), self.prefix)


async def _drop(connect_url: str, prefix: str) -> None:
    """Delete every key of namespace ``prefix`` (SCAN over its own hash tag: never on a
    request path, only for tests and ``drop_namespace``)."""
    pattern = "{" + prefix + "}:*"
    with _driver_errors():
        client = Redis.from_url(_driver_url(connect_url), max_connections=1)
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


def _driver_url(url: str) -> str:
    """``url`` as redis-py reads it (``redis+unix://`` is its ``unix://``)."""
    scheme, rest = url.split("://", 1)
    return f"{_DRIVER_SCHEMES.get(scheme.lower(), scheme)}://{rest}"


class RedisStoreBackend:
    """Opens ``redis://[user:password@]host:6379/0`` (or ``rediss://`` for TLS, or
    ``redis+unix:///path/redis.sock?db=0`` for a unix socket); ``?prefix=NAME`` picks the
    namespace, the hash tag of every key (default ``mcp_tasks``)."""

    def open(self, url: str, options: StoreOptions | None = None, /) -> RedisTaskStore:
        connect_url, prefix = _parse(url)
        return RedisTaskStore(connect_url, options, prefix=prefix)

    def namespaced(self, url: str, namespace: str, /) -> str:
        _parse(url)
        return with_query(url, prefix=namespace)

    async def drop(self, url: str, /) -> None:
        await _drop(*_parse(url))


def _parse(url: str) -> tuple[str, str]:
    """The URL redis-py connects to (without ``prefix``) and the prefix."""
    if urlsplit(url).scheme.lower() not in SCHEMES:
        raise ValueError("A Redis store URL looks like redis://host:6379/0?prefix=NAME")
    prefix = query_value(url, "prefix") or DEFAULT_PREFIX
    if not _PREFIX.fullmatch(prefix):
        raise ValueError("A Redis store's ?prefix= is letters, digits, '_', '.' or '-'")
    return with_query(url, prefix=None), prefix


def from_url(url: str, options: StoreOptions | None = None) -> RedisTaskStore:
    """The store ``url`` names (see :class:`RedisStoreBackend`)."""
    return backend.open(url, options)


#: The ``redis``, ``rediss`` and ``redis+unix`` entry points of the ``mcp_tasks.stores`` group.
backend = RedisStoreBackend()
