"""The Lua scripts behind :class:`savegame.stores.redis.RedisStore`.

Redis runs a script alone, so each script is one atomic step: the fencing
check and the writes it guards cannot interleave with another client. Redis
does not roll a script back when a command inside it fails, so every script
checks everything first (run exists, token current, id free) and writes only
after the last check.

The keys they write are drawn in :mod:`savegame.stores.redis._layout`.

Conventions shared by every script:

* ``ARGV[1]`` is the key prefix, ``{name}:``; keys are ``prefix .. kind .. ':' .. id``
  (a kind never holds a colon, so ids with colons cannot collide). Keys are built
  inside the scripts, so the store needs one Redis server (the braces put every
  key of a store in one Cluster hash slot, but Cluster is not tested).
* Lua numbers are doubles and ``tostring`` keeps 14 digits, so timestamps
  (integer microseconds) travel as strings and are only ever compared with
  ``tonumber``, never rewritten, except lease expiries, formatted with ``%.0f``.
* The first element of a reply says what happened: ``ok`` or an error code the
  store turns into an exception.
"""

from __future__ import annotations

_PRELUDE = r"""
local P = ARGV[1]
local function key(kind, id) return P .. kind .. ':' .. id end

-- Server time, so every client judges lease expiry by one clock.
local function now_micros()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function fmt(n) return string.format('%.0f', n) end

-- nil when the run exists and token is current ('' means unfenced), else an error reply.
local function fence(run_id, token)
  local current = redis.call('HGET', key('run', run_id), 'lease_token')
  if not current then return {'notfound'} end
  if token ~= '' and current ~= token then return {'lost'} end
  return nil
end

-- A journal entry starts with its JSON header, whose first element is the status.
local function status_of(entry) return string.match(entry, '^%["([%a_]+)"') end

-- P:evs:<run> maps each pending event's request id to its topic: the wake check reads
-- it, never the journal. An entry's header opens with its status, kind and name.
local function index_event(run_id, rid, entry)
  local status, kind = string.match(entry, '^%["([%a_]+)","([%a_]+)"')
  if kind ~= 'event' then return end
  if status == 'pending' then
    local cut = string.find(entry, '\0', 1, true)
    redis.call('HSET', key('evs', run_id), rid, cjson.decode(string.sub(entry, 1, cut - 1))[3])
  else
    redis.call('HDEL', key('evs', run_id), rid)
  end
end

-- Insert-if-absent, except that a not_done entry is replaced; returns what is stored.
-- A new request id joins the run's lexicographic index (list_effects' request_prefix).
local function journal(run_id, rid, entry)
  local fk = key('fx', run_id)
  local existing = redis.call('HGET', fk, rid)
  if existing and status_of(existing) ~= 'not_done' then return existing end
  redis.call('HSET', fk, rid, entry)
  if not existing then redis.call('ZADD', key('fxi', run_id), 0, rid) end
  index_event(run_id, rid, entry)
  return entry
end

-- A waiting run wakes (wake_at 0, in P:wake at score 0) once wait_need of its topics
-- have a pending event.
local function wake_if_ready(run_id)
  local rk = key('run', run_id)
  local v = redis.call('HMGET', rk, 'status', 'wait_topics', 'wait_need')
  if v[1] ~= 'waiting' or not v[3] or tonumber(v[3]) <= 0 then return end
  local pending = {}
  for _, t in ipairs(redis.call('HVALS', key('evs', run_id))) do pending[t] = true end
  local n = 0
  for _, t in ipairs(cjson.decode(v[2])) do if pending[t] then n = n + 1 end end
  if n >= tonumber(v[3]) then
    redis.call('HSET', rk, 'wake_at', '0')
    redis.call('ZADD', P .. 'wake', 0, run_id)
  end
end

-- Redis does not roll a script back, so a key edited behind the store's back into another
-- type would fail a write halfway (a checkpoint stored, its run's head not moved). nil when
-- each of keys (key, type, key, type...) is absent or of its type, else {'corrupt', key, type}.
local function wrong_type(keys)
  for j = 1, #keys, 2 do
    local t = redis.call('TYPE', keys[j]).ok
    if t ~= 'none' and t ~= keys[j + 1] then return {'corrupt', keys[j], t} end
  end
  return nil
end

local function put_blob(digest, data)
  redis.call('SET', key('blob', digest), data, 'NX')
  redis.call('SADD', P .. 'blobs', digest)
end

-- Checks and stores the blobs a checkpoint brings: ARGV[d] is its JSON array of distinct
-- digests, ARGV[b] the number of (digest, bytes) pairs that follow. Returns the digests
-- named but neither given nor stored, having written nothing, or {} having stored the blobs.
local function put_blobs(d, b)
  local n, given, missing = tonumber(ARGV[b]), {}, {}
  for j = b + 1, b + 2 * n, 2 do given[ARGV[j]] = true end
  for _, x in ipairs(cjson.decode(ARGV[d])) do
    if not given[x] and redis.call('EXISTS', key('blob', x)) == 0 then missing[#missing + 1] = x end
  end
  if #missing > 0 then return missing end
  for j = b + 1, b + 2 * n, 2 do put_blob(ARGV[j], ARGV[j + 1]) end
  return missing
end

-- ARGV[i .. i+8]: id, run, thread, header, payload, checksum, size, base, JSON array of
-- the distinct blob digests the header names (each counted once in P:refs).
local function put_cp(i)
  local id, run, thread, digests = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 8]
  redis.call('HSET', key('cp', id), 'h', ARGV[i + 3], 'p', ARGV[i + 4], 'c', ARGV[i + 5],
    'size', ARGV[i + 6], 'base', ARGV[i + 7], 'blobs', digests, 'run', run, 'thread', thread)
  redis.call('ZADD', key('cps', run), 0, id)
  redis.call('ZADD', key('tcps', thread), 0, id)
  for _, d in ipairs(cjson.decode(digests)) do redis.call('HINCRBY', P .. 'refs', d, 1) end
end

local function drop_cp(id)
  local ck = key('cp', id)
  local v = redis.call('HMGET', ck, 'run', 'thread', 'blobs')
  if not v[1] then return 0 end
  redis.call('ZREM', key('cps', v[1]), id)
  redis.call('ZREM', key('tcps', v[2]), id)
  for _, d in ipairs(cjson.decode(v[3])) do
    if redis.call('HINCRBY', P .. 'refs', d, -1) <= 0 then redis.call('HDEL', P .. 'refs', d) end
  end
  redis.call('DEL', ck)
  return 1
end

-- A thread's score in the threads index is the latest updated_at of its runs.
local function rescore_thread(thread)
  local runs = redis.call('ZRANGE', key('truns', thread), 0, -1)
  local best = nil
  for _, r in ipairs(runs) do
    local u = redis.call('HGET', key('run', r), 'updated_at')
    if u and (best == nil or tonumber(u) > tonumber(best)) then best = u end
  end
  if best == nil then redis.call('ZREM', P .. 'threads', thread)
  else redis.call('ZADD', P .. 'threads', best, thread) end
end

-- Deletes a run with its checkpoints and journal; returns checkpoints deleted, -1 if absent.
local function drop_run(run_id)
  local rk = key('run', run_id)
  local v = redis.call('HMGET', rk, 'thread_id', 'status')
  if not v[1] then return -1 end
  local n = 0
  for _, id in ipairs(redis.call('ZRANGE', key('cps', run_id), 0, -1)) do n = n + drop_cp(id) end
  redis.call('DEL', rk, key('cps', run_id), key('fx', run_id), key('fxi', run_id), key('evs', run_id))
  redis.call('ZREM', P .. 'wake', run_id)
  redis.call('ZREM', P .. 'runs', run_id)
  redis.call('ZREM', key('status', v[2]), run_id)
  redis.call('ZREM', key('truns', v[1]), run_id)
  rescore_thread(v[1])
  return n
end
"""

# ARGV: P, run_id, thread, status, created, updated, owner, ttl_micros ('' for an unowned
# run: token 1, no owner, no expiry), n, n*(field, value), then the first checkpoint
# (9 values, see put_cp), n_blobs, n_blobs*(digest, bytes), then sole ('1' or ''), the
# first checkpoint's parent ('' for none) and a JSON array of the unfinished statuses.
# Reply: {'conflict', what}, {'busy', run_id, status}, {'moved', newest}, {'missing', ...}
# or {'ok', expires}.
CREATE_RUN = r"""
local run_id, thread, status = ARGV[2], ARGV[3], ARGV[4]
local rk = key('run', run_id)
if redis.call('EXISTS', rk) == 1 then return {'conflict', 'run'} end
local n = tonumber(ARGV[9])
local c = 10 + 2 * n
if redis.call('EXISTS', key('cp', ARGV[c])) == 1 then return {'conflict', 'checkpoint'} end
local s = c + 10 + 2 * tonumber(ARGV[c + 9])
if ARGV[s] == '1' then
  -- The thread's only unfinished run, from its newest checkpoint (create_run(sole=True)).
  local unfinished = {}
  for _, st in ipairs(cjson.decode(ARGV[s + 2])) do unfinished[st] = true end
  for _, other in ipairs(redis.call('ZREVRANGE', key('truns', thread), 0, -1)) do
    local st = redis.call('HGET', key('run', other), 'status')
    if st and unfinished[st] then return {'busy', other, st} end
  end
  local newest = redis.call('ZREVRANGEBYLEX', key('tcps', thread), '+', '-', 'LIMIT', 0, 1)[1]
  if (newest or '') ~= ARGV[s + 1] then return {'moved', newest or ''} end
end
local missing = put_blobs(c + 8, c + 9)
if #missing > 0 then return {'missing', unpack(missing)} end
-- Unowned: the reply's expiry is now, a lease nobody holds, expired from the start.
local expires = now_micros()
for j = 10, 9 + 2 * n, 2 do redis.call('HSET', rk, ARGV[j], ARGV[j + 1]) end
redis.call('HSET', rk, 'lease_token', 1)
if ARGV[8] ~= '' then
  expires = expires + tonumber(ARGV[8])
  redis.call('HSET', rk, 'lease_owner', ARGV[7], 'lease_expires', fmt(expires))
end
put_cp(c)
redis.call('ZADD', P .. 'runs', ARGV[5], run_id)
redis.call('ZADD', key('status', status), ARGV[5], run_id)
redis.call('ZADD', key('truns', thread), ARGV[5], run_id)
redis.call('ZADD', P .. 'threads', 'GT', ARGV[6], thread)
return {'ok', fmt(expires)}
"""

# ARGV: P, run_id, token, status, step, updated, has_error, error, checkpoint (9 values at 9),
# n_effects at 18, n*(request_id, entry), n_blobs, n*(digest, bytes), then the wait: wake_at
# micros ('' none), topics JSON, need; then n_events, n*(run_id, request_id, entry): events
# for other runs (a child's end), dropped for a run that does not exist.
# Reply: a fence error, {'conflict'}, {'missing', digests...}, {'corrupt', key, type} or
# {'ok', cancel_requested}.
PUT_CHECKPOINT = r"""
local run_id = ARGV[2]
local err = fence(run_id, ARGV[3])
if err then return err end
if redis.call('EXISTS', key('cp', ARGV[9])) == 1 then return {'conflict'} end
local nfx = tonumber(ARGV[18])
local rk = key('run', run_id)
local v = redis.call('HMGET', rk, 'status', 'created_at', 'thread_id', 'cancel_requested')
local w = 20 + 2 * nfx + 2 * tonumber(ARGV[19 + 2 * nfx])
local typed = {key('cps', run_id), 'zset', key('tcps', ARGV[11]), 'zset', P .. 'refs', 'hash',
  P .. 'blobs', 'set', key('fx', run_id), 'hash', key('fxi', run_id), 'zset',
  key('evs', run_id), 'hash', key('status', ARGV[4]), 'zset', key('status', v[1] or ''), 'zset',
  P .. 'threads', 'zset', P .. 'wake', 'zset'}
for i = w + 4, w + 3 + 3 * tonumber(ARGV[w + 3]), 3 do
  for _, k in ipairs({key('fx', ARGV[i]), 'hash', key('fxi', ARGV[i]), 'zset',
    key('evs', ARGV[i]), 'hash', key('run', ARGV[i]), 'hash'}) do typed[#typed + 1] = k end
end
err = wrong_type(typed)
if err then return err end
-- Blobs before the record, so a committed record never points at a missing blob.
local missing = put_blobs(17, 19 + 2 * nfx)
if #missing > 0 then return {'missing', unpack(missing)} end
for i = 19, 17 + 2 * nfx, 2 do journal(run_id, ARGV[i], ARGV[i + 1]) end
put_cp(9)
local new = ARGV[4]
if v[1] ~= new then
  redis.call('ZREM', key('status', v[1]), run_id)
  redis.call('ZADD', key('status', new), v[2], run_id)
end
redis.call('HSET', rk, 'head', ARGV[9], 'status', new, 'step', ARGV[5], 'updated_at', ARGV[6])
if ARGV[7] == '1' then redis.call('HSET', rk, 'error', ARGV[8])
else redis.call('HDEL', rk, 'error') end
redis.call('ZADD', P .. 'threads', 'GT', ARGV[6], v[3])
redis.call('HDEL', rk, 'wake_at', 'wait_topics', 'wait_need')
redis.call('ZREM', P .. 'wake', run_id)
if new == 'waiting' then
  redis.call('HSET', rk, 'wait_topics', ARGV[w + 1], 'wait_need', ARGV[w + 2])
  if ARGV[w] ~= '' then
    redis.call('HSET', rk, 'wake_at', ARGV[w])
    redis.call('ZADD', P .. 'wake', ARGV[w], run_id)
  end
  wake_if_ready(run_id)
end
for i = w + 4, w + 3 + 3 * tonumber(ARGV[w + 3]), 3 do
  if redis.call('EXISTS', key('run', ARGV[i])) == 1 then
    journal(ARGV[i], ARGV[i + 1], ARGV[i + 2])
    wake_if_ready(ARGV[i])
  end
end
return {'ok', v[4] == '1' and '1' or '0'}
"""

# The soonest woken waiting run (P:wake scored at or before the caller's clock, ARGV[4]
# micros), else the oldest runnable run: queued or running (the two status indexes, merged
# by created_at then run id); either with no owner or an expired lease (as ACQUIRE_LEASE
# judges it), optionally of some workflows; leased to the caller like ACQUIRE_LEASE.
# ARGV: P, owner, ttl_micros, now_micros, n_workflows ('' for any), workflow names...,
# n_versions ('' for any), versions...
# Reply: {'none'} or {'ok', run_id, token, expires}.
CLAIM_RUN = r"""
local wanted = nil
local at = 6
if ARGV[5] ~= '' then
  wanted = {}
  for j = 6, 5 + tonumber(ARGV[5]) do wanted[ARGV[j]] = true end
  at = 6 + tonumber(ARGV[5])
end
local versions = nil
if ARGV[at] ~= '' then
  versions = {}
  for j = at + 1, at + tonumber(ARGV[at]) do versions[ARGV[j]] = true end
end
local PAGE = 100
local now = now_micros()
local function take(run_id, status_ok)
  local rk = key('run', run_id)
  local v = redis.call('HMGET', rk, 'lease_owner', 'lease_expires', 'workflow', 'status', 'version')
  local live = v[1] and v[2] and tonumber(v[2]) > now
  if not (v[3] and status_ok(v[4]) and not live and (wanted == nil or wanted[v[3]])) then
    return nil
  end
  if versions ~= nil and not (v[5] and versions[v[5]]) then return nil end
  local token = redis.call('HINCRBY', rk, 'lease_token', 1)
  local expires = fmt(now + tonumber(ARGV[3]))
  redis.call('HSET', rk, 'lease_owner', ARGV[2], 'lease_expires', expires)
  return {'ok', run_id, fmt(token), expires}
end
local function waiting(status) return status == 'waiting' end
local offset = 0
while true do
  local woken = redis.call('ZRANGEBYSCORE', P .. 'wake', '-inf', ARGV[4], 'LIMIT', offset, PAGE)
  for _, run_id in ipairs(woken) do
    local got = take(run_id, waiting)
    if got then return got end
  end
  if #woken < PAGE then break end
  offset = offset + PAGE
end
local function claimable(status) return status == 'queued' or status == 'running' end
local function cursor(status) return {k = key('status', status), buf = {}, i = 1, start = 0} end
-- The cursor's next (member, score) without moving past it; nil at the end.
local function peek(c)
  if c.i > #c.buf then
    if c.start < 0 then return nil end
    c.buf = redis.call('ZRANGE', c.k, c.start, c.start + PAGE - 1, 'WITHSCORES')
    c.i = 1
    c.start = (#c.buf < 2 * PAGE) and -1 or c.start + PAGE
    if #c.buf == 0 then return nil end
  end
  return c.buf[c.i], tonumber(c.buf[c.i + 1])
end
local queued, running = cursor('queued'), cursor('running')
while true do
  local qm, qs = peek(queued)
  local rm, rs = peek(running)
  if not qm and not rm then return {'none'} end
  local c, run_id = running, rm
  if qm and (not rm or qs < rs or (qs == rs and qm < rm)) then c, run_id = queued, qm end
  c.i = c.i + 2
  local got = take(run_id, claimable)
  if got then return got end
end
"""

# ARGV: P, run_id, owner, ttl_micros, takeover_token ('' for none).
ACQUIRE_LEASE = r"""
local rk = key('run', ARGV[2])
local v = redis.call('HMGET', rk, 'lease_token', 'lease_owner', 'lease_expires')
if not v[1] then return {'notfound'} end
local now = now_micros()
if v[2] and v[3] and tonumber(v[3]) > now and ARGV[5] ~= v[1] then
  return {'held', v[2], v[3], fmt(now)}
end
local token = redis.call('HINCRBY', rk, 'lease_token', 1)
local expires = fmt(now + tonumber(ARGV[4]))
redis.call('HSET', rk, 'lease_owner', ARGV[3], 'lease_expires', expires)
return {'ok', fmt(token), expires}
"""

# ARGV: P, run_id, token, ttl_micros.
RENEW_LEASE = r"""
local rk = key('run', ARGV[2])
local v = redis.call('HMGET', rk, 'lease_token', 'lease_owner')
if not v[1] then return {'notfound'} end
if not v[2] or v[1] ~= ARGV[3] then return {'lost'} end
local expires = fmt(now_micros() + tonumber(ARGV[4]))
redis.call('HSET', rk, 'lease_expires', expires)
return {'ok', v[2], expires}
"""

# ARGV: P, run_id, token. The token stays, so the next acquisition still gets a larger one.
RELEASE_LEASE = r"""
local rk = key('run', ARGV[2])
local token = redis.call('HGET', rk, 'lease_token')
if not token then return {'notfound'} end
if token == ARGV[3] then redis.call('HDEL', rk, 'lease_owner', 'lease_expires') end
return {'ok'}
"""

# ARGV: P, run_id, token, then a request_id and an entry for each entry, journaled in
# order. Reply: {'ok', what is stored for each}.
RECORD_INTENT = r"""
local err = fence(ARGV[2], ARGV[3])
if err then return err end
local out = {'ok'}
for i = 4, #ARGV, 2 do out[#out + 1] = journal(ARGV[2], ARGV[i], ARGV[i + 1]) end
return out
"""

# Compare-and-set of one journal entry; the store computes the new entry from the old.
# ARGV: P, run_id, token ('' unfenced), request_id, expected entry, new entry.
RECORD_RESULT = r"""
local err = fence(ARGV[2], ARGV[3])
if err then return err end
local fk = key('fx', ARGV[2])
local current = redis.call('HGET', fk, ARGV[4])
if not current then return {'nofx'} end
if current ~= ARGV[5] then return {'retry', current} end
redis.call('HSET', fk, ARGV[4], ARGV[6])
index_event(ARGV[2], ARGV[4], ARGV[6])
return {'ok'}
"""

# An event journaled outside any lease, insert-if-absent, and its run woken if ready.
# ARGV: P, run_id, request_id, entry. Reply: {'notfound'}, {'dup', stored} or {'ok'}.
DELIVER_EVENT = r"""
if redis.call('EXISTS', key('run', ARGV[2])) == 0 then return {'notfound'} end
local existing = redis.call('HGET', key('fx', ARGV[2]), ARGV[3])
if existing and status_of(existing) ~= 'not_done' then return {'dup', existing} end
journal(ARGV[2], ARGV[3], ARGV[4])
wake_if_ready(ARGV[2])
return {'ok'}
"""

# ARGV: P, run_id. An HSET on a missing run would create half a run, hence the script.
REQUEST_CANCEL = r"""
local rk = key('run', ARGV[2])
if redis.call('EXISTS', rk) == 0 then return {'notfound'} end
redis.call('HSET', rk, 'cancel_requested', '1')
return {'ok'}
"""

# ARGV: P, checkpoint_id, max_chain. Reply: ok, then (header, payload, checksum, size) per record.
GET_CHAIN = r"""
local out = {'ok'}
local seen, depth = {}, 0
local id = ARGV[2]
while id ~= '' do
  if seen[id] or depth >= tonumber(ARGV[3]) then return {'cycle', id} end
  seen[id] = true
  depth = depth + 1
  local v = redis.call('HMGET', key('cp', id), 'h', 'p', 'c', 'size', 'base')
  if not v[1] then return {'missing', id} end
  for j = 1, 4 do out[#out + 1] = v[j] end
  id = v[5]
end
return out
"""

# ARGV: P, checkpoint ids...
DELETE_CHECKPOINTS = r"""
local n = 0
for i = 2, #ARGV do n = n + drop_cp(ARGV[i]) end
return n
"""

# ARGV: P, run ids... Reply: runs deleted.
DELETE_RUNS = r"""
local n = 0
for i = 2, #ARGV do
  if drop_run(ARGV[i]) >= 0 then n = n + 1 end
end
return n
"""

# ARGV: P, thread_id. Reply: checkpoints deleted.
DELETE_THREAD = r"""
local n = 0
for _, r in ipairs(redis.call('ZRANGE', key('truns', ARGV[2]), 0, -1)) do
  n = n + math.max(drop_run(r), 0)
end
return n
"""

# ARGV: P, digests... Reply: {blobs deleted, bytes freed}.
DELETE_UNREFERENCED_BLOBS = r"""
local n, bytes = 0, 0
for i = 2, #ARGV do
  local d = ARGV[i]
  local refs = redis.call('HGET', P .. 'refs', d)
  if not refs or tonumber(refs) <= 0 then
    local bk = key('blob', d)
    local size = redis.call('STRLEN', bk)
    if redis.call('DEL', bk) == 1 then
      n = n + 1
      bytes = bytes + size
    end
    redis.call('SREM', P .. 'blobs', d)
  end
end
return {n, bytes}
"""

# ARGV: P, n, n*(id, payload, checksum, size, expected header, new header, base, JSON array
# of the new header's distinct blob digests), m, m*(run_id, request_id, expected, new),
# b, b*(digest, bytes), r, r*(run_id, metadata, has_error, error, checksum). Everything is
# checked before anything is written: a missing id or blob writes nothing, and so does a
# header or a journal entry that is no longer the one the store read (the caller reads
# it again). A record's blob references follow its new header.
REWRITE = r"""
local i = 2
local nrec = tonumber(ARGV[i])
local recs = i + 1
i = recs + 8 * nrec
local nfx = tonumber(ARGV[i])
local fxs = i + 1
i = fxs + 4 * nfx
local nb = tonumber(ARGV[i])
local blobs = i + 1
i = blobs + 2 * nb
local nrun = tonumber(ARGV[i])
local runs = i + 1
local given = {}
for j = blobs, blobs + 2 * (nb - 1), 2 do given[ARGV[j]] = true end
for j = recs, recs + 8 * (nrec - 1), 8 do
  local h = redis.call('HGET', key('cp', ARGV[j]), 'h')
  if not h then return {'missing', 'checkpoint', ARGV[j]} end
  if h ~= ARGV[j + 4] then return {'retry'} end
  for _, d in ipairs(cjson.decode(ARGV[j + 7])) do
    if not given[d] and redis.call('EXISTS', key('blob', d)) == 0 then
      return {'missing_blob', ARGV[j], d}
    end
  end
end
for j = fxs, fxs + 4 * (nfx - 1), 4 do
  if redis.call('HGET', key('fx', ARGV[j]), ARGV[j + 1]) ~= ARGV[j + 2] then return {'retry'} end
end
for j = runs, runs + 5 * (nrun - 1), 5 do
  if redis.call('EXISTS', key('run', ARGV[j])) == 0 then return {'missing', 'run', ARGV[j]} end
end
for j = blobs, blobs + 2 * (nb - 1), 2 do
  redis.call('SET', key('blob', ARGV[j]), ARGV[j + 1])
  redis.call('SADD', P .. 'blobs', ARGV[j])
end
for j = recs, recs + 8 * (nrec - 1), 8 do
  local ck = key('cp', ARGV[j])
  for _, d in ipairs(cjson.decode(redis.call('HGET', ck, 'blobs'))) do
    if redis.call('HINCRBY', P .. 'refs', d, -1) <= 0 then redis.call('HDEL', P .. 'refs', d) end
  end
  redis.call('HSET', ck, 'p', ARGV[j + 1], 'c', ARGV[j + 2], 'size', ARGV[j + 3],
    'h', ARGV[j + 5], 'base', ARGV[j + 6], 'blobs', ARGV[j + 7])
  for _, d in ipairs(cjson.decode(ARGV[j + 7])) do redis.call('HINCRBY', P .. 'refs', d, 1) end
end
for j = fxs, fxs + 4 * (nfx - 1), 4 do
  redis.call('HSET', key('fx', ARGV[j]), ARGV[j + 1], ARGV[j + 3])
end
for j = runs, runs + 5 * (nrun - 1), 5 do
  local rk = key('run', ARGV[j])
  redis.call('HSET', rk, 'metadata', ARGV[j + 1], 'checksum', ARGV[j + 4])
  if ARGV[j + 2] == '1' then redis.call('HSET', rk, 'error', ARGV[j + 3])
  else redis.call('HDEL', rk, 'error') end
end
return {'ok'}
"""

# ARGV: P, run ids... Reply: per existing run: run_id, thread, status, checkpoints,
# payload bytes, effects, effect bytes (arguments + result, after the entry's header).
RUN_SIZES = r"""
local out = {}
for i = 2, #ARGV do
  local run_id = ARGV[i]
  local v = redis.call('HMGET', key('run', run_id), 'thread_id', 'status')
  if v[1] then
    local ids = redis.call('ZRANGE', key('cps', run_id), 0, -1)
    local payload = 0
    for _, id in ipairs(ids) do payload = payload + redis.call('HSTRLEN', key('cp', id), 'p') end
    local entries = redis.call('HVALS', key('fx', run_id))
    local fx_bytes = 0
    for _, e in ipairs(entries) do fx_bytes = fx_bytes + #e - string.find(e, '\0', 1, true) end
    for _, x in ipairs({run_id, v[1], v[2], #ids, payload, #entries, fx_bytes}) do
      out[#out + 1] = x
    end
  end
end
return out
"""

SCRIPTS: dict[str, str] = {
    name: _PRELUDE + body
    for name, body in {
        "create_run": CREATE_RUN,
        "put_checkpoint": PUT_CHECKPOINT,
        "claim_run": CLAIM_RUN,
        "acquire_lease": ACQUIRE_LEASE,
        "renew_lease": RENEW_LEASE,
        "release_lease": RELEASE_LEASE,
        "record_intent": RECORD_INTENT,
        "record_result": RECORD_RESULT,
        "request_cancel": REQUEST_CANCEL,
        "deliver_event": DELIVER_EVENT,
        "get_chain": GET_CHAIN,
        "delete_checkpoints": DELETE_CHECKPOINTS,
        "delete_runs": DELETE_RUNS,
        "delete_thread": DELETE_THREAD,
        "delete_unreferenced_blobs": DELETE_UNREFERENCED_BLOBS,
        "rewrite": REWRITE,
        "run_sizes": RUN_SIZES,
    }.items()
}
"""Script name -> full source (the shared prelude plus the script's body)."""
