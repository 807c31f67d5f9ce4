"""The Lua scripts of the Redis store: every mutation is one script, one round trip.

Each script restates one pure rule of :mod:`mcp_tasks.domain.rules` on the task's hash
fields (see :mod:`mcp_tasks_redis.store` for the layout) with the server's clock (``TIME``).
Legality is never restated: the status machine's table is generated into every script from
:data:`mcp_tasks.domain.states.TRANSITIONS`. The contract suite checks that the scripts
and the rules agree: its rule-agreement part (``mcp_tasks_contract.suite.agreement``)
case by case, its stateful test (the memory store as the model) at random.

The scripts never parse a payload the user wrote (results, errors, input requests and
answers): those are JSON texts made by Python, stored and returned as they are. ``cjson`` reads only
the store's own small values (the recent event ids), and writes a hash as one reply; the one
exception is a task written before its work type had a field of its own (``wt``), whose
type is read once from its work (``x``) when a claim files it by type.

A resend of a script is recognised. redis-py sends a script again after a connection error,
also one the server had run before the connection broke (only the reply was lost). Every
write that is not idempotent carries its call's nonce, fresh per store call and the same in
every resend of it, and records ``';' .. nonce .. '=' .. answer`` in the task's ``op`` field
(the last :data:`OPS_KEPT` writes). A script that finds its own nonce there has already
written: it answers what its first run answered (the revision the write produced, or the
claim's end for ``renew``, with the current hash) and writes nothing. A claim's nonce is its
lease token (``ct``); a claim without id also keeps ``{p}:claim:<token>`` → the task's id
for the lease's time, its only way back to the task. ``release`` and ``reap`` need none: run
again, they write nothing more (the store drops ``release``'s answer).

KEYS of every script: 1 the task, 2 rows, 3 ready, 4 delayed, 5 retain, 6 the owner's
active set (``create`` only; the others read the task's ``a`` field). Keys derived inside
a script (another task's hash, an owner's active set) share the namespace's hash tag, so
they live in the same cluster slot.
"""

from __future__ import annotations

from mcp_tasks.domain.models import RECENT_EVENTS_KEPT
from mcp_tasks.domain.states import TERMINAL, TRANSITIONS, TaskStatus

#: How long after ``expires_at`` Redis itself deletes a task's hash (``PEXPIREAT``): only a
#: janitor for a namespace no reaper serves; reads treat an expired task as missing, and the
#: reaper normally deletes it (and its index entries) first.
JANITOR_GRACE_MS = 60_000

#: How many of a task's last writes a resend of theirs is recognised after (the ``op``
#: field): a resend comes within redis-py's few resends of the write, so writes by other
#: calls in between are few.
OPS_KEPT = 8

#: The value of ``{p}:rows:counted`` once every task is filed in every set the counts and
#: stats read (set by a namespace's first create, or by ``migrate`` after filing the tasks
#: written before); another value, or none, and they read the tasks themselves.
FILED = "2"


def _status_machine() -> str:
    """The status machine as Lua tables: ``NEXT['status:event']`` and ``TERMINAL[status]``."""
    pairs = ", ".join(
        f"['{status}:{event}'] = '{target}'" for (status, event), target in TRANSITIONS.items()
    )
    terminal = ", ".join(f"['{status}'] = true" for status in sorted(TERMINAL))
    statuses = ", ".join(f"'{status.value}'" for status in TaskStatus)
    return (
        f"local NEXT = {{{pairs}}}\nlocal TERMINAL = {{{terminal}}}\n"
        f"local STATUSES = {{{statuses}}}\n"
    )


_COMMON = (
    _status_machine()
    + f"""
local JANITOR_GRACE_MS = {JANITOR_GRACE_MS}
local OPS_KEPT = {OPS_KEPT}
local FILED = '{FILED}'
local RECENT_EVENTS_KEPT = {RECENT_EVENTS_KEPT}
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function ms(n) return string.format('%d', n) end
-- A task's hash as one JSON object text (field → value; '{{}}' for no task): one bulk reply
-- instead of a list of every field and value, which costs the client more to parse
local function hash_json(key)
  local flat = redis.call('HGETALL', key)
  local fields = {{}}
  for i = 1, #flat, 2 do
    if flat[i] ~= 'op' then fields[flat[i]] = flat[i + 1] end
  end
  return cjson.encode(fields)
end
local function expired(e, now) return e ~= '' and tonumber(e) <= now end
-- record.visible_to: a task without owner ('o' absent) answers to anyone; the caller is
-- '*' (ANY_OWNER), '-' (no owner) or '=' .. owner
local function visible_to(o, caller)
  return not o or caller == '*' or caller == '=' .. o
end
-- rules.held_until: keep the task at least until ``upto`` (a task without TTL stays so)
local function hold_until(key, f_e, f_c, upto)
  if f_e ~= '' and tonumber(f_e) < upto then
    redis.call('HSET', key, 'e', ms(upto), 'l', ms(upto - tonumber(f_c)))
  end
end
-- The answer this call's first run recorded in ``ops`` (the task's 'op'), or nil: a resend
local function resent(ops, nonce)
  if not ops then return nil end
  local _, stop = string.find(ops, ';' .. nonce .. '=', 1, true)
  if not stop then return nil end
  return string.match(ops, '^[^;]*', stop + 1)
end
-- ``ops`` with this call's answer, the last OPS_KEPT kept
local function with_op(ops, nonce, answer)
  ops = (ops or '') .. ';' .. nonce .. '=' .. answer
  local _, kept = string.gsub(ops, ';', ';')
  if kept > OPS_KEPT then ops = string.sub(ops, (string.find(ops, ';', 2, true))) end
  return ops
end
-- rules._applied: revision + 1, last_updated_at strictly increasing; the call's nonce
-- recorded with the revision
local function applied(key, status, now, nonce)
  local f = redis.call('HMGET', key, 'n', 'u', 'op')
  local updated = math.max(now, tonumber(f[2]) + 1)
  local revision = ms(tonumber(f[1]) + 1)
  redis.call('HSET', key, 's', status, 'n', revision, 'u', ms(updated),
    'op', with_op(f[3], nonce, revision))
end
-- the outstanding input requests dropped; their keys stay in 'd:', asked over the life,
-- unless ``unask`` (a retry: rules.unasked, the next attempt may ask them again)
local function clear_requests(key, unask)
  if redis.call('HGET', key, 'qn') == '0' then return end
  for _, name in ipairs(redis.call('HKEYS', key)) do
    if string.sub(name, 1, 2) == 'q:' then
      redis.call('HDEL', key, name)
      if unask then redis.call('HDEL', key, 'd:' .. string.sub(name, 3)) end
    end
  end
  redis.call('HSET', key, 'qn', 0)
end
-- '' = None, '=' .. text = text
local function set_message(key, text)
  if text == '' then
    redis.call('HDEL', key, 'm')
  else
    redis.call('HSET', key, 'm', string.sub(text, 2))
  end
end
-- rules.claim_lane: where a task waits for a claim, from its status, has-work flag,
-- created_at, retry_at and claim end → 'ready', created_at | 'waiting', the later of a
-- pending retry and the claim's end | nil (no work, or no claim for its status)
local function claim_lane(s, w, c, r, ce)
  if w ~= '1' or not NEXT[s .. ':claim'] then return nil end
  local wait = nil
  if r ~= '' then wait = tonumber(r) end
  if ce ~= '' and (not wait or tonumber(ce) > wait) then wait = tonumber(ce) end
  if wait then return 'waiting', wait end
  return 'ready', tonumber(c)
end
-- The task's work type ('wt'; S-CLAIM.4), or nil without work. A task written before the
-- field existed gets it from its work in 'x' (JSON the store wrote: the descriptor), once.
local function work_type(key)
  local f = redis.call('HMGET', key, 'wt', 'w', 'x')
  if f[1] then return f[1] end
  if f[2] ~= '1' or not f[3] then return nil end
  local wt = cjson.decode(f[3])['work']['type']
  redis.call('HSET', key, 'wt', wt)
  return wt
end
-- The ready set of a work type ('{{p}}:ready:' .. type), and the set of the types that have
-- one ('{{p}}:ready-types'): a claim for some types reads only their sets' heads. KEYS[3]
-- ('{{p}}:ready') is the ready set of tasks filed before the sets per type: it only empties.
local function types_key() return KEYS[3] .. '-types' end
local function ready_key(wt) return KEYS[3] .. ':' .. wt end
local function file_ready(key, id, created_at)
  local wt = work_type(key)
  redis.call('ZADD', ready_key(wt), created_at, id)
  redis.call('SADD', types_key(), wt)
end
-- a < b byte by byte (a sorted set's order of members of one score), whatever the locale
local function bytes_before(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
-- The task filed in its status's set ('{{p}}:rows:' .. status, by expires_at), and in no
-- other (``s`` nil: in none): the store's counts per status, kept by the writes
local function file_status(id, s, score)
  for _, status in ipairs(STATUSES) do
    if status == s then
      redis.call('ZADD', KEYS[2] .. ':' .. status, score, id)
    else
      redis.call('ZREM', KEYS[2] .. ':' .. status, id)
    end
  end
end
-- ``member`` in sorted set ``set`` with ``score`` when ``wanted``, else out of it
local function filed(set, wanted, score, member)
  if wanted then
    redis.call('ZADD', set, score, member)
  else
    redis.call('ZREM', set, member)
  end
end
-- The task filed in the sets stats counts from ('{{p}}:rows:' .. name; ``s`` nil: in none):
-- the active tasks with a claim by its end ('leases': rules.is_claimed, lease_lapsed), with
-- a retry by retry_at ('retries': rules.retry_due, retry_pending), the working tasks by
-- created_at ('working-since': the oldest one)
local function file_stats(id, s, c, r, ce)
  local live = s and not TERMINAL[s]
  filed(KEYS[2] .. ':leases', live and ce ~= '', ce, id)
  filed(KEYS[2] .. ':retries', live and r ~= '', r, id)
  filed(KEYS[2] .. ':working-since', s == 'working', c, id)
end
-- An owner's active tasks counted (its active set's size) in '{{p}}:rows:owners', and its
-- set's earliest expiry in '{{p}}:rows:owner-expiry' (members: the sets' keys, never read
-- out): stats' per-owner figures. Tasks without an owner ('{{p}}:active:n') are no owner's.
local function count_owner(a)
  if not a or not string.find(a, ':active:s:', 1, true) then return end
  local n = redis.call('ZCARD', a)
  local first = redis.call('ZRANGE', a, 0, 0, 'WITHSCORES')
  filed(KEYS[2] .. ':owners', n > 0, n, a)
  filed(KEYS[2] .. ':owner-expiry', n > 0, first[2], a)
end
-- Every index and the janitor's expiry from the task's fields (module docstring of store):
-- the claim lanes are the ready sets and the delayed set
local function reindex(key, id)
  local f = redis.call('HMGET', key, 's', 'w', 'c', 'u', 'e', 'l', 'r', 'ce', 'a')
  local s, e = f[1], f[5]
  local score = e
  if e == '' then score = '+inf' end
  redis.call('ZADD', KEYS[2], score, id)
  file_status(id, s, score)
  file_stats(id, s, f[3], f[7], f[8])
  filed(f[9], not TERMINAL[s], score, id)
  count_owner(f[9])
  local lane, at = claim_lane(s, f[2], f[3], f[7], f[8])
  redis.call('ZREM', KEYS[3], id)
  if lane == 'ready' then
    file_ready(key, id, ms(at))
  elseif f[2] == '1' then
    redis.call('ZREM', ready_key(work_type(key)), id)
  end
  if lane == 'waiting' then
    redis.call('ZADD', KEYS[4], ms(at), id)
  else
    redis.call('ZREM', KEYS[4], id)
  end
  if TERMINAL[s] and f[6] == '' then
    redis.call('ZADD', KEYS[5], f[4], id)
  else
    redis.call('ZREM', KEYS[5], id)
  end
  if e == '' then
    redis.call('PERSIST', key)
  else
    redis.call('PEXPIREAT', key, ms(tonumber(e) + JANITOR_GRACE_MS))
  end
end
"""
)

# rules.new_record (and apply_claim for a task created claimed, S-CREATE.6), after the id
# check, the row cap and the per-owner cap (expired rows count toward neither).
# ARGV: 1 id, 2 max rows ('' none), 3 max active per owner ('' none), 4 static doc,
# 5 owner ('' none, '=' .. owner), 6 retry delays (comma-separated), 7 has work ('1'/'0'),
# 8 ttl_ms ('' none), 9 status message ('' none, '=' .. text), 10 claimed by ('' none),
# 11 claim token, 12 lease_ms, 13 nonce, 14 work type ('' none)
# → 'dup' | 'limit' (the row cap) | 'owner_limit'
# | {'ok', hash} (also for a resend that finds the task its first run made)
CREATE = (
    _COMMON
    + """
local key, id = KEYS[1], ARGV[1]
if redis.call('EXISTS', key) == 1 then
  if resent(redis.call('HGET', key, 'op'), ARGV[13]) then return {'ok', hash_json(key)} end
  return 'dup'
end
local now = now_ms()
-- a namespace's first task: its status sets hold every task from here on
if redis.call('ZCARD', KEYS[2]) == 0 then redis.call('SET', KEYS[2] .. ':counted', FILED) end
-- expired tasks are not active: drop them from the owner's set while we are here
redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', ms(now))
count_owner(KEYS[6])
if ARGV[2] ~= '' and redis.call('ZCOUNT', KEYS[2], '(' .. ms(now), '+inf') >= tonumber(ARGV[2]) then
  return 'limit'
end
if ARGV[3] ~= '' and redis.call('ZCARD', KEYS[6]) >= tonumber(ARGV[3]) then
  return 'owner_limit'
end
local e = ''
if ARGV[8] ~= '' then e = ms(now + tonumber(ARGV[8])) end
redis.call('HSET', key, 'x', ARGV[4], 'rd', ARGV[6], 'w', ARGV[7], 'a', KEYS[6], 's', 'working',
  'n', 0, 'c', ms(now), 'u', ms(now), 'e', e, 'l', ARGV[8], 'at', 0, 'r', '', 'g', 0,
  'cw', '', 'ct', '', 'ce', '', 'qn', 0, 'ev', '[]', 'op', with_op(nil, ARGV[13], 0))
if ARGV[5] ~= '' then redis.call('HSET', key, 'o', string.sub(ARGV[5], 2)) end
if ARGV[7] == '1' then redis.call('HSET', key, 'wt', ARGV[14]) end
set_message(key, ARGV[9])
if ARGV[10] ~= '' then
  local ends = now + tonumber(ARGV[12])
  hold_until(key, e, ms(now), ends)
  redis.call('HSET', key, 'g', 1, 'cw', ARGV[10], 'ct', ARGV[11], 'ce', ms(ends))
end
reindex(key, id)
return {'ok', hash_json(key)}
"""
)

# KEYS: 1 the task → {now, its hash} (the hash is '{}' when there is no such task)
READ = (
    _COMMON
    + """
return {now_ms(), hash_json(KEYS[1])}
"""
)

# rules.apply_put: lookup, event id, lease, revision, the status machine, then the change.
# ARGV: 1 id, 2 kind (progress, require_input, complete, fail, retry), 3 event id ('' none,
# '=' .. id), 4 its fingerprint, 5 lease token ('' none), 6 lease generation, 7 expected
# revision ('' none), 8 result retention ms, 9 status message ('' none, '=' .. text),
# 10 the result or error JSON, 11 the error's message ('' none, '=' .. text),
# 12 nonce, 13.. per input request: key, request JSON, request digest
# → {'missing'} | {'reused'} | {'claimed'} | {'stale'} | {'invalid', event, status}
#   | {'keys', {reused keys}} | {outcome, revision, hash} (outcome: duplicate, conflict,
#   unchanged, applied)
PUT = (
    _COMMON
    + """
local key, id = KEYS[1], ARGV[1]
local now = now_ms()
local f = redis.call('HMGET', key, 's', 'e', 'n', 'ev', 'ct', 'ce', 'g', 'at', 'rd', 'op')
if not f[1] or expired(f[2], now) then return {'missing'} end
local done = resent(f[10], ARGV[12])
if done then return {'applied', done, hash_json(key)} end
local s = f[1]
local events = nil
if ARGV[3] ~= '' then
  local event_id = string.sub(ARGV[3], 2)
  events = cjson.decode(f[4])
  for _, seen in ipairs(events) do
    if seen[1] == event_id then
      if seen[2] ~= ARGV[4] then return {'reused'} end
      return {'duplicate', seen[3], hash_json(key)}
    end
  end
end
local live = f[6] ~= '' and tonumber(f[6]) > now
if ARGV[5] == '' then
  if live then return {'claimed'} end
elseif not live or f[5] ~= ARGV[5] or f[7] ~= ARGV[6] then
  return {'stale'}
end
if ARGV[7] ~= '' and ARGV[7] ~= f[3] then return {'conflict', f[3], hash_json(key)} end
local kind = ARGV[2]
local event, delay = kind, nil
if kind == 'retry' then
  local delays = {}
  for part in string.gmatch(f[9], '[^,]+') do table.insert(delays, part) end
  delay = delays[tonumber(f[8]) + 1]
  if not delay then event = 'fail' end
end
local target = NEXT[s .. ':' .. event]
if not target then
  if TERMINAL[s] then return {'unchanged', f[3], hash_json(key)} end
  return {'invalid', event, s}
end
if kind == 'require_input' then
  local reused = {}
  for i = 13, #ARGV, 3 do
    if redis.call('HEXISTS', key, 'd:' .. ARGV[i]) == 1 then table.insert(reused, ARGV[i]) end
  end
  if #reused > 0 then return {'keys', reused} end
end
applied(key, target, now, ARGV[12])
if kind == 'progress' then
  set_message(key, ARGV[9])
elseif event == 'fail' then
  clear_requests(key)
  redis.call('HSET', key, 'err', ARGV[10])
  if ARGV[9] ~= '' then set_message(key, ARGV[9]) else set_message(key, ARGV[11]) end
else
  clear_requests(key, kind == 'retry')
  if ARGV[9] ~= '' then set_message(key, ARGV[9]) end
  if kind == 'require_input' then
    for i = 13, #ARGV, 3 do
      redis.call('HSET', key, 'q:' .. ARGV[i], ARGV[i + 1], 'd:' .. ARGV[i], ARGV[i + 2])
    end
    redis.call('HSET', key, 'qn', (#ARGV - 12) / 3)
  elseif kind == 'complete' then
    redis.call('HSET', key, 'res', ARGV[10])
  else -- a retry with a delay left
    redis.call('HSET', key, 'at', tonumber(f[8]) + 1, 'r', ms(now + tonumber(delay)),
      'cw', '', 'ct', '', 'ce', '')
  end
end
-- rules._finished: an ended task stays readable for the result retention
if TERMINAL[target] and tonumber(ARGV[8]) > 0 then
  local g = redis.call('HMGET', key, 'e', 'c')
  hold_until(key, g[1], g[2], now + tonumber(ARGV[8]))
end
local revision = redis.call('HGET', key, 'n')
if events then
  table.insert(events, {string.sub(ARGV[3], 2), ARGV[4], revision})
  while #events > RECENT_EVENTS_KEPT do table.remove(events, 1) end
  redis.call('HSET', key, 'ev', cjson.encode(events))
end
reindex(key, id)
return {'applied', revision, hash_json(key)}
"""
)

# rules.apply_cancel. ARGV: 1 id, 2 caller ('*', '-' or '=' .. owner), 3 result retention ms,
# 4 nonce
# → {'missing'} | {'invalid', 'cancel', status} | {outcome, revision, hash}
CANCEL = (
    _COMMON
    + """
local key, id = KEYS[1], ARGV[1]
local now = now_ms()
local f = redis.call('HMGET', key, 's', 'e', 'o', 'n', 'op')
if not f[1] or expired(f[2], now) or not visible_to(f[3], ARGV[2]) then return {'missing'} end
local done = resent(f[5], ARGV[4])
if done then return {'applied', done, hash_json(key)} end
local target = NEXT[f[1] .. ':cancel']
if not target then
  if TERMINAL[f[1]] then return {'unchanged', f[4], hash_json(key)} end
  return {'invalid', 'cancel', f[1]}
end
applied(key, target, now, ARGV[4])
clear_requests(key)
redis.call('HDEL', key, 'm')
if TERMINAL[target] and tonumber(ARGV[3]) > 0 then
  local g = redis.call('HMGET', key, 'e', 'c')
  hold_until(key, g[1], g[2], now + tonumber(ARGV[3]))
end
reindex(key, id)
return {'applied', redis.call('HGET', key, 'n'), hash_json(key)}
"""
)

# rules.apply_update. ARGV: 1 id, 2 caller, 3 nonce, 4.. per answer: key, its JSON ('' = not
# JSON-safe) → {'missing'} | {'notjson', key} | {outcome, revision, hash}
UPDATE = (
    _COMMON
    + """
local key, id = KEYS[1], ARGV[1]
local now = now_ms()
local f = redis.call('HMGET', key, 's', 'e', 'o', 'n', 'qn', 'op')
if not f[1] or expired(f[2], now) or not visible_to(f[3], ARGV[2]) then return {'missing'} end
local done = resent(f[6], ARGV[3])
if done then return {'applied', done, hash_json(key)} end
local answered = {}
for i = 4, #ARGV, 2 do
  if redis.call('HEXISTS', key, 'q:' .. ARGV[i]) == 1 then table.insert(answered, i) end
end
if #answered == 0 then return {'unchanged', f[4], hash_json(key)} end
local event = 'answer_some'
if #answered == tonumber(f[5]) then event = 'answer_all' end
local target = NEXT[f[1] .. ':' .. event]
if not target then return {'unchanged', f[4], hash_json(key)} end
for _, i in ipairs(answered) do
  if ARGV[i + 1] == '' then return {'notjson', ARGV[i]} end
end
applied(key, target, now, ARGV[3])
for _, i in ipairs(answered) do
  redis.call('HDEL', key, 'q:' .. ARGV[i])
  redis.call('HSET', key, 'i:' .. ARGV[i], ARGV[i + 1])
end
redis.call('HSET', key, 'qn', tonumber(f[5]) - #answered)
reindex(key, id)
return {'applied', redis.call('HGET', key, 'n'), hash_json(key)}
"""
)

# rules.claimable and rules.apply_claim: the task at ``key`` is claimed for ``worker`` with
# ``token`` if eligible at ``now`` → its hash after the claim; 'bad' (nothing written) for a
# non-positive lease; nil when it is not eligible.
_CLAIM_FUNCTION = """
-- A resend of the claim whose token is ``token``: the task's hash while that claim is live
local function resent_claim(key, token, now)
  local f = redis.call('HMGET', key, 'ct', 'ce')
  if f[1] ~= token or not f[2] or f[2] == '' or tonumber(f[2]) <= now then return nil end
  return hash_json(key)
end
-- rules.of_work_types: ARGV[first] is '*' (any type) or '=', then the types asked for
local function wanted(key, first)
  if ARGV[first] == '*' then return true end
  local wt = work_type(key)
  if not wt then return false end
  for i = first + 1, #ARGV do
    if ARGV[i] == wt then return true end
  end
  return false
end
local function claim(key, id, now, worker, token, lease)
  local f = redis.call('HMGET', key, 's', 'w', 'c', 'e', 'r', 'ce', 'g')
  if not f[1] or f[2] ~= '1' or not NEXT[f[1] .. ':claim'] then return nil end
  if expired(f[4], now) then return nil end
  if f[5] ~= '' and tonumber(f[5]) > now then return nil end
  if f[6] ~= '' and tonumber(f[6]) > now then return nil end
  if lease <= 0 then return 'bad' end
  local ends = now + lease
  hold_until(key, f[4], f[3], ends)
  redis.call('HSET', key, 'g', tonumber(f[7]) + 1, 'cw', worker, 'ct', token, 'ce', ms(ends),
    'r', '')
  reindex(key, id)
  return hash_json(key)
end
"""

# ARGV: 1 id, 2 worker, 3 token (the call's nonce), 4 lease_ms, 5 '*' (any work type) or
# '=', 6.. the work types asked for
CLAIM_ONE = (
    _COMMON
    + _CLAIM_FUNCTION
    + """
local now = now_ms()
local again = resent_claim(KEYS[1], ARGV[3], now)
if again then return again end
if redis.call('EXISTS', KEYS[1]) == 0 or not wanted(KEYS[1], 5) then return nil end
return claim(KEYS[1], ARGV[1], now, ARGV[2], ARGV[3], tonumber(ARGV[4]))
"""
)

# The oldest claimable task (rules.claim_order: each ready set is ordered by created_at,
# then id) of the work types asked for (S-CLAIM.4), claimed: the heads of those types' ready
# sets only, O(types * log n). Due delayed tasks move to their type's ready set first (and
# a batch of tasks filed before the sets per type, while any are left); expired ones leave
# it for good (no write revives an expired task). KEYS[1] is ``{p}:claim:<token>``: the id
# of the task this call claimed, for the lease's time (how a resend finds it). ARGV: 1 task
# key prefix, 2 worker, 3 token (the call's nonce), 4 lease_ms, 5 '*' (any work type: every
# type that has a ready set) or '=', 6.. the work types asked for
CLAIM_NEXT = (
    _COMMON
    + _CLAIM_FUNCTION
    + """
local now = now_ms()
local mine = redis.call('GET', KEYS[1])
if mine then
  local again = resent_claim(ARGV[1] .. mine, ARGV[3], now)
  if again then return again end
end
local function promote(ids, from)
  for _, id in ipairs(ids) do
    redis.call('ZREM', from, id)
    local key = ARGV[1] .. id
    local c = redis.call('HGET', key, 'c')
    if c then file_ready(key, id, c) end
  end
end
promote(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', ms(now)), KEYS[4])
promote(redis.call('ZRANGE', KEYS[3], 0, 99), KEYS[3])
local types = {}
if ARGV[5] == '*' then
  types = redis.call('SMEMBERS', types_key())
else
  for i = 6, #ARGV do table.insert(types, ARGV[i]) end
end
while true do
  -- the oldest head of the types' ready sets (same created_at: the smaller id)
  local best_id, best_at, best_set = nil, nil, nil
  for _, wt in ipairs(types) do
    local set = ready_key(wt)
    local head = redis.call('ZRANGE', set, 0, 0, 'WITHSCORES')
    if #head == 0 then
      if ARGV[5] == '*' then redis.call('SREM', types_key(), wt) end
    else
      local at = tonumber(head[2])
      if not best_id or at < best_at or (at == best_at and bytes_before(head[1], best_id)) then
        best_id, best_at, best_set = head[1], at, set
      end
    end
  end
  if not best_id then return nil end
  local claimed = claim(ARGV[1] .. best_id, best_id, now, ARGV[2], ARGV[3], tonumber(ARGV[4]))
  if claimed then
    if claimed ~= 'bad' then redis.call('SET', KEYS[1], best_id, 'PX', ARGV[4]) end
    return claimed
  end
  redis.call('ZREM', best_set, best_id)
end
"""
)

# rules.apply_renew (the caller has refused a non-positive lease): 'stale' (nothing
# written) or the claim's new end. ARGV: 1 id, 2 token, 3 generation, 4 lease_ms, 5 nonce
RENEW = (
    _COMMON
    + """
local key, id = KEYS[1], ARGV[1]
local now = now_ms()
local f = redis.call('HMGET', key, 's', 'e', 'c', 'ce', 'ct', 'g', 'op')
if not f[1] then return 'stale' end
local done = resent(f[7], ARGV[5])
if done then return done end
if expired(f[2], now) or not NEXT[f[1] .. ':renew'] then return 'stale' end
if f[4] == '' or tonumber(f[4]) <= now or f[5] ~= ARGV[2] or f[6] ~= ARGV[3] then
  return 'stale'
end
local ends = now + tonumber(ARGV[4])
hold_until(key, f[2], f[3], ends)
redis.call('HSET', key, 'ce', ms(ends), 'op', with_op(f[7], ARGV[5], ms(ends)))
reindex(key, id)
return ms(ends)
"""
)

# rules.apply_release: the claim freed if the lease is the task's (its token and generation;
# expired or not), else nothing. ARGV: 1 id, 2 token, 3 generation → 1 | 0
RELEASE = (
    _COMMON
    + """
local key, id = KEYS[1], ARGV[1]
local f = redis.call('HMGET', key, 's', 'ce', 'ct', 'g')
if not f[1] or f[2] == '' or f[3] ~= ARGV[2] or f[4] ~= ARGV[3] then return 0 end
redis.call('HSET', key, 'cw', '', 'ct', '', 'ce', '')
reindex(key, id)
return 1
"""
)

# rules.is_reapable: expired rows, then terminal rows without TTL past the retention.
# KEYS: 2 rows, 3 ready, 4 delayed, 5 retain (1 unused); ARGV: 1 task key prefix,
# 2 terminal retention ms, 3 limit → how many were deleted
REAP = (
    _COMMON
    + """
local now = now_ms()
local limit = tonumber(ARGV[3])
local ids = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ms(now), 'LIMIT', 0, limit)
if #ids < limit then
  local old = ms(now - tonumber(ARGV[2]))
  local more = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', old, 'LIMIT', 0, limit - #ids)
  for _, id in ipairs(more) do table.insert(ids, id) end
end
for _, id in ipairs(ids) do
  local key = ARGV[1] .. id
  local f = redis.call('HMGET', key, 'a', 'wt')
  if f[1] then
    redis.call('ZREM', f[1], id)
    count_owner(f[1])
  end
  if f[2] then redis.call('ZREM', ready_key(f[2]), id) end
  redis.call('DEL', key)
  for i = 2, 5 do redis.call('ZREM', KEYS[i], id) end
  file_status(id, nil, 0)
  file_stats(id, nil)
end
return #ids
"""
)

# The counts (rules.counts_toward_cap per status): read from the status sets, no task read.
# KEYS: 2 rows → {now, rows, counted (FILED: the sets hold every task), then the unexpired
# tasks of each status in STATUSES' order}
COUNTS = (
    _COMMON
    + """
local now = now_ms()
local out = {now, redis.call('ZCARD', KEYS[2]), redis.call('GET', KEYS[2] .. ':counted') or ''}
for _, status in ipairs(STATUSES) do
  table.insert(out, redis.call('ZCOUNT', KEYS[2] .. ':' .. status, '(' .. ms(now), '+inf'))
end
return out
"""
)

# stats(): every figure of StoreStats but the caps from the sets the writes keep, reading
# only the tasks whose figure moves with the clock alone: lapsed leases and due retries
# (claimable or not), and the ones past their TTL the reaper has not deleted (to take them
# out of what they are still filed in). KEYS: 2 rows, 3 ready; ARGV: 1 task key prefix,
# 2 rules.EXPIRY_HORIZON_MS, 3 rules.UNCLAIMED_AFTER_MS, 4 how many owners to rank
# → {now, rows, counted, the unexpired tasks of each status in STATUSES' order,
#    expiring_soon, claimed, lease_lapsed, retry_due, retry_pending, waiting_unclaimed,
#    oldest working created_at ('' none), owners, then the largest per-owner counts}
STATS = (
    _COMMON
    + """
local now = now_ms()
local rows, prefix = KEYS[2], ARGV[1]
local before = now - tonumber(ARGV[3])
local out = {now, redis.call('ZCARD', rows), redis.call('GET', rows .. ':counted') or ''}
for _, status in ipairs(STATUSES) do
  table.insert(out, redis.call('ZCOUNT', rows .. ':' .. status, '(' .. ms(now), '+inf'))
end
local function count(set, low, high) return redis.call('ZCOUNT', set, low, high) end
local later, soon = '(' .. ms(now), ms(now + tonumber(ARGV[2]))
local ready = {KEYS[3]}
for _, wt in ipairs(redis.call('SMEMBERS', types_key())) do table.insert(ready, ready_key(wt)) end
local function is_ready(id)
  for _, set in ipairs(ready) do
    if redis.call('ZSCORE', set, id) then return true end
  end
  return false
end
-- rules.waits_unclaimed: the ready lanes hold claimable tasks (until past their TTL)
local waiting = 0
for _, set in ipairs(ready) do waiting = waiting + count(set, '-inf', ms(before)) end
-- rules.claimable of a task whose claim ran out or whose retry is due (at most one of
-- the two: a claim clears retry_at, a retry the claim); one a claim moved to a ready lane
-- is counted there already
local function due(set, other)
  local n = 0
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', set, '-inf', ms(now))) do
    local f = redis.call('HMGET', prefix .. id, 's', 'e', 'w', 'c', other)
    if f[1] and not expired(f[2], now) and f[3] == '1' and NEXT[f[1] .. ':claim']
        and (f[5] == '' or tonumber(f[5]) <= now) then
      n = n + 1
      if tonumber(f[4]) <= before and not is_ready(id) then waiting = waiting + 1 end
    end
  end
  return n
end
local claimed = count(rows .. ':leases', later, '+inf')
local lapsed = due(rows .. ':leases', 'r')
local retry_due = due(rows .. ':retries', 'ce')
local pending = count(rows .. ':retries', later, '+inf')
-- the tasks past their TTL, still filed where they were
for _, id in ipairs(redis.call('ZRANGEBYSCORE', rows, '-inf', ms(now))) do
  local r = redis.call('ZSCORE', rows .. ':retries', id)
  if r and tonumber(r) > now then pending = pending - 1 end
  for _, set in ipairs(ready) do
    local c = redis.call('ZSCORE', set, id)
    if c and tonumber(c) <= before then waiting = waiting - 1 end
  end
end
local oldest, place = '', 0
while true do
  local head = redis.call('ZRANGE', rows .. ':working-since', place, place, 'WITHSCORES')
  if #head == 0 then break end
  local e = redis.call('HGET', prefix .. head[1], 'e')
  if e and not expired(e, now) then
    oldest = head[2]
    break
  end
  place = place + 1
end
for _, n in ipairs({count(rows, later, soon), claimed, lapsed, retry_due, pending, waiting}) do
  table.insert(out, n)
end
table.insert(out, oldest)
-- owners: their active counts, but for the owners with a task past its TTL (counted anew)
local owners = rows .. ':owners'
local stale = redis.call('ZRANGEBYSCORE', rows .. ':owner-expiry', '-inf', ms(now))
local live, gone = {}, 0
for _, a in ipairs(stale) do
  live[a] = count(a, later, '+inf')
  if live[a] == 0 then gone = gone + 1 end
end
table.insert(out, redis.call('ZCARD', owners) - gone)
local top = redis.call('ZREVRANGE', owners, 0, tonumber(ARGV[4]) + #stale - 1, 'WITHSCORES')
for i = 1, #top, 2 do
  local n = live[top[i]] or tonumber(top[i + 1])
  if n > 0 then table.insert(out, n) end
end
return out
"""
)

# The status sets brought up to date for some tasks (``migrate``: the tasks written before
# the sets existed): each task filed by its hash, a task without hash filed nowhere. What a
# write files is the same, so a write between two batches changes nothing of it.
# KEYS: 2 rows; ARGV: 1 task key prefix, 2.. task ids; ARGV[1] '' after the last batch marks
# the sets complete → how many tasks were filed
FILE_STATUSES = (
    _COMMON
    + """
if ARGV[1] == '' then
  redis.call('SET', KEYS[2] .. ':counted', FILED)
  return 0
end
for i = 2, #ARGV do
  local key = ARGV[1] .. ARGV[i]
  if redis.call('EXISTS', key) == 1 then
    reindex(key, ARGV[i])
  else
    file_status(ARGV[i], nil, 0)
    file_stats(ARGV[i], nil)
  end
end
return #ARGV - 1
"""
)
