"""The Redis Store: one JSON document per task, sorted sets as indexes, Lua for atomicity.

Keys of one namespace (``prefix``) all share the hash tag ``{prefix}``, so a namespace lives
in one cluster slot and every script touches one slot:

* ``{p}:t:<task id>`` — a hash: ``d`` the record (:func:`mcp_tasks.stores.codec.record_to_json`),
  ``v`` its version (from the namespace counter ``{p}:seq``, so a reaped and re-created id
  never reuses one), ``c`` ``created_at``, ``e`` ``expires_at`` (empty: no TTL), ``a`` the
  key of the owner's active set;
* ``{p}:rows`` — every task by ``expires_at`` (``+inf`` without TTL): the row cap counts
  the unexpired ones, ``reap`` takes the expired ones;
* ``{p}:active:n`` / ``{p}:active:s:<owner>`` — one owner's live tasks by ``expires_at``:
  the per-owner cap;
* ``{p}:ready`` — live tasks with work, no claim and no pending retry, by ``created_at``
  (members of one score sort by id: exactly ``rules.claim_order``);
* ``{p}:delayed`` — live tasks with work waiting for a time (their claim's end or
  ``retry_at``), by that time; a claim moves the due ones into ``ready``;
* ``{p}:retain`` — terminal tasks without TTL by ``last_updated_at`` (``S-REAP``).

Time is the server's (``TIME`` inside the scripts). Writes are optimistic: one script reads
the record, its version and the server's now; the shared rules (:mod:`mcp_tasks.domain.rules`)
compute the write; one script applies it (record and indexes) only if the version is
unchanged, else the store reads again. ``create`` (id check, row cap, per-owner cap, insert)
and ``reap`` are one script each. Scripts run by SHA; redis-py loads them again on
``NOSCRIPT``.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Self, TypeVar
from urllib.parse import urlsplit

from redis.asyncio import Redis
from redis.exceptions import RedisError

from mcp_tasks.domain import rules
from mcp_tasks.domain.errors import (
    DuplicateTaskId,
    MCPTasksError,
    StoreUnavailable,
    TaskLimitReached,
)
from mcp_tasks.domain.jsonsafe import dumps, loads
from mcp_tasks.domain.models import Claimed, Lease, Outcome, StoreOptions, Transition
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
SCHEMES = ("redis", "rediss")
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
-- idx (5 strings): rows score; active, ready, delayed, retain scores ('' = not a member)
local function put(id, doc, created, expires, idx)
  local v = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], 'd', doc, 'v', v, 'c', created, 'e', expires, 'a', KEYS[4])
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

# ARGV: id, doc, created_at, expires_at, max_rows, max_active_per_owner, idx x5
_CREATE = (
    _COMMON
    + """
if redis.call('EXISTS', KEYS[1]) == 1 then return 'dup' end
local now = ms(now_ms())
if ARGV[5] ~= '' and redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf') >= tonumber(ARGV[5]) then
  return 'limit'
end
if ARGV[6] ~= '' and redis.call('ZCOUNT', KEYS[4], '(' .. now, '+inf') >= tonumber(ARGV[6]) then
  return 'limit'
end
put(ARGV[1], ARGV[2], ARGV[3], ARGV[4], {ARGV[7], ARGV[8], ARGV[9], ARGV[10], ARGV[11]})
return 'ok'
"""
)

# ARGV: id, expected version, doc, created_at, expires_at, idx x5 → 1 written, 0 lost race
_WRITE = (
    _COMMON
    + """
if redis.call('HGET', KEYS[1], 'v') ~= ARGV[2] then return 0 end
put(ARGV[1], ARGV[3], ARGV[4], ARGV[5], {ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10]})
return 1
"""
)

# KEYS: task → {now, version, doc} (version and doc nil when there is no such task)
_READ = (
    _COMMON
    + """
local f = redis.call('HMGET', KEYS[1], 'v', 'd')
return {now_ms(), f[1], f[2]}
"""
)

# KEYS: ready, delayed; ARGV: task key prefix → {now} or {now, id, version, doc} of the
# oldest claimable task. Due delayed tasks move to ready; expired ones leave it for good
# (no write revives an expired task).
_PICK = (
    _COMMON
    + """
local now = now_ms()
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ms(now))
for _, id in ipairs(due) do
  redis.call('ZREM', KEYS[2], id)
  local c = redis.call('HGET', ARGV[1] .. id, 'c')
  if c then redis.call('ZADD', KEYS[1], c, id) end
end
while true do
  local head = redis.call('ZRANGE', KEYS[1], 0, 0)
  if #head == 0 then return {now} end
  local id = head[1]
  local f = redis.call('HMGET', ARGV[1] .. id, 'e', 'v', 'd')
  if f[2] and (f[1] == '' or tonumber(f[1]) > now) then return {now, id, f[2], f[3]} end
  redis.call('ZREM', KEYS[1], id)
end
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
            raise ValueError("A Redis store URL looks like redis://host:6379/0")
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
        """The URL that opens this store's namespace again (a password masked)."""
        return mask_password(with_query(self.connect_url, prefix=self.prefix))

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
                self.connect_url, decode_responses=False, max_connections=self._max_connections
            )
            client = self._redis
            self._scripts = {
                name: client.register_script(text)
                for name, text in (
                    ("create", _CREATE),
                    ("write", _WRITE),
                    ("read", _READ),
                    ("pick", _PICK),
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

    @staticmethod
    def _fields(record: TaskRecord) -> list[str | int]:
        """doc, created_at, expires_at: what the write scripts store beside the indexes."""
        expires = "" if record.expires_at is None else str(record.expires_at)
        return [dumps(record_to_json(record)), record.created_at, expires]

    async def _read(self, task_id: str) -> tuple[TaskRecord | None, str | None, int]:
        now, version, doc = await self._run("read", [self._task_key(task_id)], [])
        if version is None:
            return None, None, int(now)
        return record_from_json(loads(doc)), _text(version), int(now)

    async def _write(self, record: TaskRecord, version: str) -> bool:
        doc, created, expires = self._fields(record)
        args: list[str | int] = [record.task_id, version, doc, created, expires, *_index(record)]
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
        options = self.options
        doc, created, expires = self._fields(record)
        cap, per_owner = options.max_rows, options.max_active_per_owner
        args: list[str | int] = [
            task.task_id,
            doc,
            created,
            expires,
            "" if cap is None else cap,
            "" if per_owner is None else per_owner,
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
        return await self._modify(
            task_id, lambda r, now: _written(rules.apply_update(r, owner, input_responses, now))
        )

    async def cancel(self, task_id: str, owner: OwnerArg) -> Transition:
        retention = self.options.result_retention_ms
        return await self._modify(
            task_id,
            lambda r, now: _written(
                rules.apply_cancel(r, owner, now, result_retention_ms=retention)
            ),
        )

    async def put_status(
        self,
        task_id: str,
        change: StatusChange,
        *,
        lease: Lease | None = None,
        expected_revision: int | None = None,
        event_id: str | None = None,
    ) -> Transition:
        def compute(record: TaskRecord | None, now: int) -> tuple[Transition, TaskRecord | None]:
            return _written(
                rules.apply_put(
                    record,
                    change,
                    now,
                    result_retention_ms=self.options.result_retention_ms,
                    lease=lease,
                    expected_revision=expected_revision,
                    event_id=event_id,
                )
            )

        return await self._modify(task_id, compute)

    async def claim(
        self, worker_id: str, *, lease_ms: int, task_id: str | None = None
    ) -> Claimed | None:
        while True:
            if task_id is None:
                picked = await self._run("pick", [self._ready, self._delayed], [self._task_prefix])
                if len(picked) == 1:
                    return None
                now, version = int(picked[0]), _text(picked[2])
                record: TaskRecord | None = record_from_json(loads(picked[3]))
            else:
                record, maybe_version, now = await self._read(task_id)
                if record is None or maybe_version is None:
                    return None
                version = maybe_version
            assert record is not None
            if not rules.claimable(record, now):  # by id; or the indexes drifted from the rule
                return None
            claimed = rules.apply_claim(record, worker_id, lease_ms, now)
            if await self._write(claimed.record, version):
                return claimed

    async def renew(self, lease: Lease, *, lease_ms: int) -> Lease:
        def compute(record: TaskRecord | None, now: int) -> tuple[Lease, TaskRecord | None]:
            renewed = rules.apply_renew(record, lease, lease_ms, now)
            return renewed.lease, renewed.record

        return await self._modify(lease.task_id, compute)

    async def release(self, lease: Lease) -> None:
        def compute(record: TaskRecord | None, now: int) -> tuple[None, TaskRecord | None]:
            return None, rules.apply_release(record, lease)

        await self._modify(lease.task_id, compute)

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

    # --- namespaces ---------------------------------------------------------------------

    async def _drop_namespace(self) -> None:
        """Delete every key of this namespace (SCAN over its own hash tag: never on a
        request path, only for tests and ``drop_namespace``)."""
        client = self._client()
        pattern = "{" + self.prefix + "}:*"
        with _driver_errors():
            batch: list[Any] = []
            async for key in client.scan_iter(match=pattern, count=1000):
                batch.append(key)
                if len(batch) >= 500:
                    await client.unlink(*batch)
                    batch = []
            if batch:
                await client.unlink(*batch)


def _written(transition: Transition) -> tuple[Transition, TaskRecord | None]:
    """A transition and the record to persist: only an applied change writes."""
    return transition, transition.record if transition.outcome is Outcome.APPLIED else None


class RedisStoreBackend:
    """Opens ``redis://[user:password@]host:6379/0`` (or ``rediss://`` for TLS);
    ``?prefix=NAME`` picks the namespace, the hash tag of every key (default ``mcp_tasks``)."""

    def open(self, url: str, options: StoreOptions | None = None, /) -> RedisTaskStore:
        connect_url, prefix = _parse(url)
        return RedisTaskStore(connect_url, options, prefix=prefix)

    def namespaced(self, url: str, namespace: str, /) -> str:
        _parse(url)
        return with_query(url, prefix=namespace)

    async def drop(self, url: str, /) -> None:
        connect_url, prefix = _parse(url)
        store = RedisTaskStore(connect_url, prefix=prefix, max_connections=1)
        try:
            await store._drop_namespace()
        finally:
            await store.close()


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


#: The ``redis`` and ``rediss`` entry points of the ``mcp_tasks.stores`` group.
backend = RedisStoreBackend()
