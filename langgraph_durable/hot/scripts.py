"""Lua scripts of the hot tier. Each runs atomically in one round trip.

KEYS always start with the nine thread keys in ``ThreadKeys.all`` order
(cp, cv, idx, bl, w, wi, ns, meta, it). The writing scripts (PUT, PUT_WRITES) then take the
thread's tombstones (``gone``) and the thread's outbox stream as KEYS[11], in the same
slot (``hot/keys.py``), so a checkpoint and its outbox entry are one atomic step on a
Redis Cluster too. PUT also takes the partition's thread registry as KEYS[12] (registering
the thread), PAGE optionally as KEYS[10] (answering "no such thread"; ``hot/registry.py``).

Plans never build KEYS/ARGV themselves: each script has an argument class below with
named fields, whose ``op()`` encodes them in the order the Lua source reads them (the one
place that knows ``ARGV[4]`` is the member). ``Refusal.of`` names the errors the writing
scripts reply with; ``ChainStatus`` the statuses of CHAIN.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..core.ops import Script
from .effects import EFFECT_SCRIPTS
from .registry import REGISTRY_SCRIPTS

_PERSIST_AND_OUTBOX = r"""
if redis.call('HSETNX', KEYS[8], 'born', 0) == 1 then  -- this incarnation of the thread
  local clock = redis.call('TIME')
  redis.call('HSET', KEYS[8], 'born', tonumber(clock[1]) * 1000
             + math.floor(tonumber(clock[2]) / 1000))
end
redis.call('HINCRBY', KEYS[8], 'dirty', 1)
redis.call('HINCRBY', KEYS[8], 'u' .. ARGV[4], 1)  -- this checkpoint has unflushed entries
for i = 1, 9 do redis.call('PERSIST', KEYS[i]) end
local entry = 'ok'
if #KEYS >= 11 then
  entry = redis.call('XADD', KEYS[11], '*', 't', ARGV[2], 'p', ARGV[3])
end
"""

_OUTBOX_BOUND = r"""
if #KEYS >= 11 then
  local max = tonumber(ARGV[1])
  if max > 0 and redis.call('XLEN', KEYS[11]) >= max then
    return redis.error_reply('OUTBOX_FULL')
  end
end
"""

# Lua helpers for items (see items.py): refs_into adds the digests of a manifest envelope
# (MANIFEST_MAGIC, 4-byte length, digests) to acc; hmget_all is HMGET in slices of 1000
# (Lua's unpack limit); items_of reads the items and nodes named (KEYS[9]) and the items
# of those nodes, returning {digests, stored values (false = missing)}, leaving out those
# in the set have (items the caller holds, e.g. PAGE's ARGV[4]); missing_items
# counts the digests of the manifests among values[first..last by step] that neither
# Redis holds nor sent (a set) brings.
_ITEMS = r"""
local function refs_into(v, acc, seen)
  if v and string.sub(v, 1, 2) == '\193I' then
    local n = struct.unpack('>I4', v, 3)
    for p = 7, 6 + n, 16 do
      local d = string.sub(v, p, p + 15)
      if not seen[d] then seen[d] = true; acc[#acc + 1] = d end
    end
  end
end
local function hmget_all(key, names)
  local out = {}
  for i = 1, #names, 1000 do
    local got = redis.call('HMGET', key, unpack(names, i, math.min(i + 999, #names)))
    for j = 1, #got do out[#out + 1] = got[j] end
  end
  return out
end
local function items_of(refs, have)
  local names, vals = {}, {}
  if have then  -- digests the caller holds already: not sent back
    local want = {}
    for i = 1, #refs do if not have[refs[i]] then want[#want + 1] = refs[i] end end
    refs = want
  end
  if #refs == 0 then return {names, vals} end
  local got = hmget_all(KEYS[9], refs)
  local inner, seen = {}, have or {}
  for i = 1, #refs do seen[refs[i]] = true end
  for i = 1, #refs do
    local v = got[i]
    names[#names + 1] = refs[i]; vals[#vals + 1] = v
    if v and string.sub(v, 1, 2) == '\193N' then
      for p = 3, #v, 16 do
        local c = string.sub(v, p, p + 15)
        if not seen[c] then seen[c] = true; inner[#inner + 1] = c end
      end
    end
  end
  if #inner > 0 then
    local iv = hmget_all(KEYS[9], inner)
    for i = 1, #inner do names[#names + 1] = inner[i]; vals[#vals + 1] = iv[i] end
  end
  return {names, vals}
end
local function missing_items(first, last, step, sent)
  local refs, seen, missing = {}, {}, 0
  for i = first, last, step do refs_into(ARGV[i], refs, seen) end
  for _, d in ipairs(refs) do
    if not sent[d] and redis.call('HEXISTS', KEYS[9], d) == 0 then missing = missing + 1 end
  end
  return missing
end
"""


def _deleted_ref(ref: int) -> str:
    """Lua refusing a write that names a deleted checkpoint: the member ``ARGV[ref]`` (a
    put's parent, put_writes' checkpoint, a subgraph's enclosing checkpoint; ``''`` =
    none) that Redis does not hold and that a delete tombstoned (KEYS[10]: every delete
    leaves a tombstone per checkpoint it removed, so a checkpoint not stored *yet* is never
    taken for a deleted one) gets ``DELETED <deletion time ms>`` when that time is later
    than ``ARGV[ref + 1]`` (ms; the caller found in MongoDB a checkpoint of that id stored
    after a delete of that time, by ``copy_thread`` or an import, and sends again). A member
    Redis neither holds nor has a tombstone of is taken when the tombstones hold field
    ``!`` (they hold every tombstone of the thread: LEARN_TOMBSTONES), else it gets
    ``UNKNOWN`` while ``ARGV[ref + 1]`` is 0: Redis cannot tell (it lost its data, its
    tombstones expired), so the caller loads MongoDB's tombstones of the thread into Redis
    and sends again with a checked-through time of at least 1 (``plans/tombstones.py``).
    Unless the partition's complete thread registry (KEYS[12]) has never seen the thread
    (``never_stored``): then no tier holds a checkpoint or a tombstone of it (a new thread
    whose pending writes come before its first put), so the write is taken, also while
    MongoDB is down."""
    return f"""
if ARGV[{ref}] ~= '' and redis.call('HEXISTS', KEYS[1], ARGV[{ref}]) == 0 then
  local at = redis.call('HGET', KEYS[10], ARGV[{ref}])
  if at then
    if tonumber(at) > tonumber(ARGV[{ref + 1}]) then return redis.error_reply('DELETED ' .. at) end
  elseif ARGV[{ref + 1}] == '0' and redis.call('HEXISTS', KEYS[10], '!') == 0
      and not never_stored() then
    -- the reply carries the checkpoint_id only (an error string ends at a NUL)
    local cut = string.find(ARGV[{ref}], '\\0', 1, true) or 0
    return redis.error_reply('UNKNOWN ' .. string.sub(ARGV[{ref}], cut + 1))
  end
end
"""


# The thread registry (KEYS[12], hot/keys.py): the thread is one of those Redis has stored
# (field thread_id -> '1'; 'd' once delete_thread removed it from both tiers: its
# tombstones may still refuse late writes). never_stored: a complete registry has no field
# for the thread, so no tier holds a checkpoint or a tombstone of it.
# new_in_registry: no checkpoint of the thread in Redis, and a complete registry lacks it,
# so no tier holds one: pending writes that raced the thread's first put (LangGraph sends
# them concurrently) made its meta, yet Redis holds the whole thread.
_REGISTRY = r"""
local function never_stored()
  if #KEYS < 12 or redis.call('HEXISTS', KEYS[12], ARGV[2]) == 1 then return false end
  local epoch = redis.call('HGET', KEYS[12], '\0epoch') or ''
  return string.sub(epoch, 1, 9) == 'complete '
end
local function new_in_registry()
  if #KEYS < 12 or redis.call('EXISTS', KEYS[3]) == 1
      or redis.call('HGET', KEYS[12], ARGV[2]) == '1' then return false end
  local epoch = redis.call('HGET', KEYS[12], '\0epoch') or ''
  return string.sub(epoch, 1, 9) == 'complete '
end
"""
_REGISTER = r"""
if #KEYS >= 12 then redis.call('HSET', KEYS[12], ARGV[2], 1) end
"""

# ARGV: max_outbox, thread_id, outbox payload, member, ns, record, cv, expected head member
# ('' = no expectation), new-thread flag, parent member ('' = none), checked-through ms,
# the number of blob pairs, the blob field/value pairs, then item digest/value pairs. A
# manifest naming an item Redis lacks and the call does not bring is refused
# (MISSING_ITEMS <count>): the caller sends again with every item. A parent that was
# deleted is refused (see _deleted_ref).
# With an expected head, the put is refused (STALE_HEAD <actual>) when another run has extended the
# namespace meanwhile: the namespace's head is the member PUT last wrote there (meta
# 'h' .. ns), not its largest checkpoint_id (ids made by hosts whose clocks differ need not
# increase). A new member below the namespace's largest one (clock skew) is stored as
# InMemorySaver stores it; the reply is then {entry id, that largest checkpoint_id}
# instead of the entry id. With the new-thread flag ('1': a thread's first input checkpoint,
# see put_plan) on a thread Redis holds nothing of (or only pending writes of, when the
# complete thread registry lacks it), meta 'complete' = 1: Redis holds the whole thread,
# so reads need not ask MongoDB about what Redis lacks (PAGE).
PUT = _ITEMS + _REGISTRY + _OUTBOX_BOUND + _deleted_ref(10) + r"""
if ARGV[8] ~= '' then
  local head = redis.call('HGET', KEYS[8], 'h' .. ARGV[5])
  if head and head ~= ARGV[8] and head ~= ARGV[4] then
    -- the reply carries the head's checkpoint_id only (an error string ends at a NUL)
    return redis.error_reply('STALE_HEAD ' .. string.sub(head, #ARGV[5] + 2))
  end
end
local newer = false
if redis.call('HEXISTS', KEYS[1], ARGV[4]) == 0 then
  local above = redis.call('ZREVRANGEBYLEX', KEYS[3], '(' .. ARGV[5] .. '\1', '(' .. ARGV[4],
                           'LIMIT', 0, 1)
  if #above > 0 then newer = string.sub(above[1], #ARGV[5] + 2) end
end
local last = 12 + 2 * tonumber(ARGV[12])
local sent = {}
for i = last + 1, #ARGV, 2 do sent[ARGV[i]] = true end
local missing = missing_items(14, last, 2, sent)
if missing > 0 then return redis.error_reply('MISSING_ITEMS ' .. missing) end
if ARGV[9] == '1' and (redis.call('EXISTS', KEYS[8]) == 0 or new_in_registry()) then
  redis.call('HSET', KEYS[8], 'complete', 1)
end
if never_stored() then  -- no tier holds a checkpoint or a tombstone of the thread: its
  -- tombstones are all in Redis (none), so writes naming a checkpoint Redis lacks need no
  -- MongoDB (as LEARN_TOMBSTONES marks them; expires as tombstones do: TOMBSTONE_TTL_S)
  redis.call('HSET', KEYS[10], '!', 1)
  if redis.call('TTL', KEYS[10]) < 0 then redis.call('EXPIRE', KEYS[10], 604800) end
end
redis.call('HSET', KEYS[1], ARGV[4], ARGV[6])
redis.call('HSET', KEYS[2], ARGV[4], ARGV[7])
redis.call('ZADD', KEYS[3], 0, ARGV[4])
redis.call('HSETNX', KEYS[7], ARGV[5], ARGV[4])
redis.call('HSET', KEYS[8], 'h' .. ARGV[5], ARGV[4])
for i = last + 1, #ARGV, 2 do redis.call('HSETNX', KEYS[9], ARGV[i], ARGV[i + 1]) end
for i = 13, last, 2 do redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 1]) end
""" + _REGISTER + _PERSIST_AND_OUTBOX + r"""
if newer then return {entry, newer} end
return entry
"""

# ARGV: max_outbox, thread_id, outbox payload, checkpoint member, checked-through ms, the
# number of triples, triples (field, value, overwrite 0/1), then item digest/value pairs
# (MISSING_ITEMS as in PUT). Ordinary writes are insert-once (HSETNX); special channels
# overwrite (HSET). A deleted checkpoint is refused (see _deleted_ref).
PUT_WRITES = _ITEMS + _REGISTRY + _OUTBOX_BOUND + _deleted_ref(4) + r"""
local last = 6 + 3 * tonumber(ARGV[6])
local sent = {}
for i = last + 1, #ARGV, 2 do sent[ARGV[i]] = true end
local missing = missing_items(8, last, 3, sent)
if missing > 0 then return redis.error_reply('MISSING_ITEMS ' .. missing) end
for i = last + 1, #ARGV, 2 do redis.call('HSETNX', KEYS[9], ARGV[i], ARGV[i + 1]) end
for i = 7, last, 3 do
  if ARGV[i + 2] == '1' then
    redis.call('HSET', KEYS[5], ARGV[i], ARGV[i + 1])
  else
    redis.call('HSETNX', KEYS[5], ARGV[i], ARGV[i + 1])
  end
  redis.call('ZADD', KEYS[6], 0, ARGV[i])
end
""" + _PERSIST_AND_OUTBOX + r"""
return entry
"""

# A page of checkpoints, newest first, with everything needed to build their tuples.
# KEYS: the nine thread keys, then optionally the thread registry of its partition.
# ARGV: lex max, lex min (ZREVRANGEBYLEX bounds), count, the concatenated 16-byte digests
# of items the caller holds (not sent back; may be empty), and with the registry the
# thread_id.
# Returns {{member, record, cv, {write values}}, ...}, {blob fields}, {blob values},
# complete (1 when Redis holds the whole thread: see PUT; 2 when it holds every namespace's
# newest checkpoints but not all older ones: see the hot window; 3 when no tier holds any
# checkpoint of the thread: see the registry), {item digests}, {item values}
# (the items and nodes the manifests among those values name, see items_of).
PAGE = _ITEMS + r"""
local members = redis.call('ZREVRANGEBYLEX', KEYS[3], ARGV[1], ARGV[2], 'LIMIT', 0,
                           tonumber(ARGV[3]))
local out, seen, fields = {}, {}, {}
for _, m in ipairs(members) do
  local rec = redis.call('HGET', KEYS[1], m) or ''
  local cv = redis.call('HGET', KEYS[2], m) or ''
  local wf = redis.call('ZRANGEBYLEX', KEYS[6], '[' .. m .. '\0', '(' .. m .. '\1')
  local wv = {}
  if #wf > 0 then wv = redis.call('HMGET', KEYS[5], unpack(wf)) end
  if cv ~= '' then
    local parts = cmsgpack.unpack(cv)
    for j = 2, #parts do
      local f = parts[j]
      if not seen[f] then seen[f] = true; fields[#fields + 1] = f end
    end
  end
  out[#out + 1] = {m, rec, cv, wv}
end
local values = {}
if #fields > 0 then values = hmget_all(KEYS[4], fields) end
local complete = tonumber(redis.call('HGET', KEYS[8], 'complete') or '0') or 0
if redis.call('EXISTS', KEYS[3]) == 0 then
  complete = 0
  -- no checkpoint in Redis, and a complete registry (KEYS[10]) without the thread
  -- (ARGV[5]): no tier holds any checkpoint of it
  if #KEYS >= 10 and redis.call('HGET', KEYS[10], ARGV[5]) ~= '1' then
    local epoch = redis.call('HGET', KEYS[10], '\0epoch') or ''
    if string.sub(epoch, 1, 9) == 'complete ' then complete = 3 end
  end
end
local refs, rseen = {}, {}
for i = 1, #fields do refs_into(values[i], refs, rseen) end
for _, row in ipairs(out) do
  for _, v in ipairs(row[4]) do refs_into(v, refs, rseen) end
end
local have = nil
if ARGV[4] and #ARGV[4] > 0 then
  have = {}
  for p = 1, #ARGV[4], 16 do have[string.sub(ARGV[4], p, p + 15)] = true end
end
local it = items_of(refs, have)
return {out, fields, values, complete, it[1], it[2]}
"""

# Pending writes (and blob values) of checkpoints whose records may live in MongoDB only.
# ARGV: n members, members..., then blob fields.  Returns {{write values}...}, {blob values},
# {item digests}, {item values} (as PAGE).
PARTS = _ITEMS + r"""
local n = tonumber(ARGV[1])
local out = {}
for i = 2, n + 1 do
  local m = ARGV[i]
  local wf = redis.call('ZRANGEBYLEX', KEYS[6], '[' .. m .. '\0', '(' .. m .. '\1')
  local wv = {}
  if #wf > 0 then wv = redis.call('HMGET', KEYS[5], unpack(wf)) end
  out[#out + 1] = wv
end
local values, fields = {}, {}
for i = n + 2, #ARGV do fields[#fields + 1] = ARGV[i] end
if #fields > 0 then values = hmget_all(KEYS[4], fields) end
local refs, rseen = {}, {}
for i = 1, #fields do refs_into(values[i], refs, rseen) end
for _, wv in ipairs(out) do
  for _, v in ipairs(wv) do refs_into(v, refs, rseen) end
end
local it = items_of(refs)
return {out, values, it[1], it[2]}
"""

# Settling a thread after MongoDB took entries of it (ACK_SETTLE): lower its
# 'dirty' count and each checkpoint's unflushed count (meta field 'u' .. member); once
# nothing is left to flush, let the hot keys expire after ttl seconds (0 = keep). Then the
# hot window: in each namespace the entries touched, once it holds maxhot + slack
# (max(16, maxhot / 2)) checkpoints, keep the newest maxhot (0 = all) and those with
# unflushed entries; older ones leave Redis (record, index,
# pending writes, and the channel values no kept checkpoint names) and are read from
# MongoDB. Only entries of this incarnation of the thread count (an older one's entries
# were written before a delete_thread). The thread's nine keys are KEYS[base..base+8].
_SETTLE_THREAD = r"""
local function trim(base, ns, maxn)
  -- only once maxn + slack are held: the kept checkpoints' indexes are read once per
  -- slack new checkpoints, not at every settle
  local slack = math.max(16, math.floor(maxn / 2))
  if redis.call('ZLEXCOUNT', KEYS[base + 2], '[' .. ns .. '\0', '(' .. ns .. '\1')
      <= maxn + slack then return end
  local members = redis.call('ZREVRANGEBYLEX', KEYS[base + 2], '(' .. ns .. '\1',
                             '[' .. ns .. '\0')
  local keep, evict = {}, {}
  for i, m in ipairs(members) do
    local cv = redis.call('HGET', KEYS[base + 1], m)
    if i <= maxn or redis.call('HEXISTS', KEYS[base + 7], 'u' .. m) == 1 then
      if cv then
        local p = cmsgpack.unpack(cv)
        for j = 2, #p do keep[p[j]] = true end
      end
    else
      evict[#evict + 1] = {m, cv}
    end
  end
  if #evict == 0 then return end
  -- Redis no longer holds all of it, still every namespace's newest checkpoints
  if redis.call('HGET', KEYS[base + 7], 'complete') == '1' then
    redis.call('HSET', KEYS[base + 7], 'complete', 2)
  end
  for _, e in ipairs(evict) do
    local m, cv = e[1], e[2]
    redis.call('HDEL', KEYS[base], m)
    redis.call('HDEL', KEYS[base + 1], m)
    redis.call('ZREM', KEYS[base + 2], m)
    local wf = redis.call('ZRANGEBYLEX', KEYS[base + 5], '[' .. m .. '\0', '(' .. m .. '\1')
    for i = 1, #wf, 1000 do
      local part = {unpack(wf, i, math.min(i + 999, #wf))}
      redis.call('HDEL', KEYS[base + 4], unpack(part))
      redis.call('ZREM', KEYS[base + 5], unpack(part))
    end
    if cv then
      local p = cmsgpack.unpack(cv)
      for j = 2, #p do
        if not keep[p[j]] then redis.call('HDEL', KEYS[base + 3], p[j]) end
      end
    end
  end
end
local function settle(base, done, ttl, maxhot)
  local meta = KEYS[base + 7]
  if redis.call('EXISTS', meta) == 0 then return 0 end  -- thread deleted meanwhile
  local born = tonumber(redis.call('HGET', meta, 'born') or '0')
  local n, nss = 0, {}
  for _, e in ipairs(done) do
    if e[1] >= born then
      n = n + 1
      local f = 'u' .. e[2]
      if redis.call('HINCRBY', meta, f, -1) <= 0 then redis.call('HDEL', meta, f) end
      local cut = string.find(e[2], '\0', 1, true)
      if cut then nss[string.sub(e[2], 1, cut - 1)] = true end
    end
  end
  if n == 0 then return -1 end
  local left = redis.call('HINCRBY', meta, 'dirty', -n)
  if left <= 0 then
    redis.call('HSET', meta, 'dirty', 0)
    if ttl > 0 then
      for j = base, base + 8 do redis.call('EXPIRE', KEYS[j], ttl) end
    end
  end
  if maxhot > 0 then
    for ns in pairs(nss) do trim(base, ns, maxhot) end
  end
  return left
end
"""

# Acknowledge and delete flushed outbox entries and settle their threads in one atomic step,
# so no crash can land between the two (a thread whose entries left the outbox with its
# 'dirty' count never lowered would keep its hot keys forever). One call per outbox
# partition: its stream and its threads share one slot, on a cluster too (hot/keys.py).
# KEYS: the partition's outbox stream, then the nine keys of each thread.
# ARGV: consumer group, hot ttl (s), maxhot, then per thread: k, its k (entry id, member).
# Returns {{1/0 per entry id in ARGV order: acknowledged by this call}, outbox length}.
ACK_SETTLE = _SETTLE_THREAD + r"""
local group, ttl, maxhot = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local acked, ids = {}, {}
local a, base = 4, 2
while a <= #ARGV do
  local k = tonumber(ARGV[a])
  local done = {}
  for i = a + 1, a + 2 * k, 2 do
    local ok = redis.call('XACK', KEYS[1], group, ARGV[i])
    acked[#acked + 1] = ok
    ids[#ids + 1] = ARGV[i]
    if ok == 1 then done[#done + 1] = {tonumber(string.match(ARGV[i], '^%d+')), ARGV[i + 1]} end
  end
  if #done > 0 then settle(base, done, ttl, maxhot) end
  a, base = a + 2 * k + 1, base + 9
end
for i = 1, #ids, 1000 do
  redis.call('XDEL', KEYS[1], unpack(ids, i, math.min(i + 999, #ids)))
end
return {acked, redis.call('XLEN', KEYS[1])}
"""

_NOW_MS = r"""
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
"""

# Remove checkpoints (members), their writes and the given blob fields from the thread, and
# leave a tombstone (KEYS[10], field -> deletion time in ms, for ARGV[1] seconds) so a flusher
# that wrote an older copy after this (a stalled "zombie" round) takes it back out of MongoDB.
# A namespace whose head (meta 'h' .. ns, see PUT) was removed has none until the next put.
# ARGV: tombstone ttl, n members, members..., then blob fields. Returns the deletion time
# (ms, Redis clock).
DELETE_PARTS = _NOW_MS + r"""
local n = tonumber(ARGV[2])
for i = 3, n + 2 do
  local m = ARGV[i]
  redis.call('HDEL', KEYS[1], m)
  redis.call('HDEL', KEYS[2], m)
  redis.call('ZREM', KEYS[3], m)
  local wf = redis.call('ZRANGEBYLEX', KEYS[6], '[' .. m .. '\0', '(' .. m .. '\1')
  if #wf > 0 then
    redis.call('HDEL', KEYS[5], unpack(wf))
    redis.call('ZREM', KEYS[6], unpack(wf))
  end
  redis.call('HSET', KEYS[10], m, now)
  local cut = string.find(m, '\0', 1, true)  -- the namespace's head (see PUT) is gone
  if cut and redis.call('HGET', KEYS[8], 'h' .. string.sub(m, 1, cut - 1)) == m then
    redis.call('HDEL', KEYS[8], 'h' .. string.sub(m, 1, cut - 1))
  end
end
for i = n + 3, #ARGV do
  redis.call('HDEL', KEYS[4], ARGV[i])
  redis.call('HSET', KEYS[10], ARGV[i], now)
end
redis.call('EXPIRE', KEYS[10], tonumber(ARGV[1]))
return now
"""

# Remove every key of the thread; tombstone '*' (see DELETE_PARTS) and every checkpoint it
# held (each member of the index, plus ARGV[2..]: those only MongoDB holds), so a late write
# naming one of them is refused (_deleted_ref). ARGV: tombstone ttl, members...
# Returns {deletion time (ms, Redis clock), the members Redis held}.
DELETE_THREAD = _NOW_MS + r"""
local held = redis.call('ZRANGE', KEYS[3], 0, -1)
for i = 1, #held, 1000 do
  local pairs = {}
  for j = i, math.min(i + 999, #held) do pairs[#pairs + 1] = held[j]; pairs[#pairs + 1] = now end
  redis.call('HSET', KEYS[10], unpack(pairs))
end
for i = 2, #ARGV do redis.call('HSET', KEYS[10], ARGV[i], now) end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8],
                KEYS[9])
redis.call('HSET', KEYS[10], '*', now)
redis.call('EXPIRE', KEYS[10], tonumber(ARGV[1]))
return {now, held}
"""

# The tombstones of a thread loaded from MongoDB (plans/tombstones.py), after a write Redis
# could not answer for (UNKNOWN, see _deleted_ref): each field/time pair set unless Redis
# holds one (a tombstone Redis holds is from a delete since Redis last lost its data: never
# older than MongoDB's), then field '!' = 1: Redis now holds every tombstone of the thread,
# so a write naming a checkpoint it neither holds nor has a tombstone of (a task's writes
# arriving before their checkpoint's put) is taken without asking MongoDB. The hash, '!'
# with it, expires after at most ARGV[1] seconds (kept when it expires sooner).
# KEYS: the thread's tombstones. ARGV: ttl, then field/time pairs.
LEARN_TOMBSTONES = r"""
for i = 2, #ARGV, 2 do redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('HSET', KEYS[1], '!', 1)
local left = redis.call('TTL', KEYS[1])
if left < 0 or left > tonumber(ARGV[1]) then redis.call('EXPIRE', KEYS[1], tonumber(ARGV[1])) end
return 1
"""

# Drop a thread's hot keys once everything in them is in MongoDB, so its reads go to MongoDB
# (copy_thread and import wrote there). Refused while entries are unflushed: returns the
# 'dirty' count (the caller waits for the flusher and tries again); 0 when done. A fresh
# meta stays as a marker for ARGV[1] seconds: the next put then finds the thread not new,
# so Redis is never taken as holding the whole thread (no 'complete', see PUT).
RELEASE = r"""
local dirty = tonumber(redis.call('HGET', KEYS[8], 'dirty') or '0')
if dirty > 0 then return dirty end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8],
           KEYS[9])
redis.call('HSET', KEYS[8], 'released', 1)
redis.call('EXPIRE', KEYS[8], tonumber(ARGV[1]))
return 0
"""

# Walk the parent chain of ARGV[2] (a checkpoint_id in namespace ARGV[1]) for the channels
# ARGV[4..]: per ancestor its id, index (cv), write values and the non-empty blob values of
# still-open channels; a channel closes at its first stored value. At most ARGV[3] ancestors.
# Returns {status, rows, next, {item digests}, {item values}}: status 0 = done, 1 = next
# ancestor is not in Redis (next is its id), 2 = a blob Redis lacks must be looked up (next
# = the ancestor's id; its row lists the fields), 3 = the step limit was reached (next = the
# last ancestor's id), 4 = the target itself is not in Redis. The items are those the
# manifests among the rows' values name (as PAGE).
CHAIN = _ITEMS + r"""
local function walk()
local ns, maxn = ARGV[1], tonumber(ARGV[3])
local open, nopen = {}, 0
for i = 4, #ARGV do open[ARGV[i]] = true; nopen = nopen + 1 end
local cv = redis.call('HGET', KEYS[2], ns .. '\0' .. ARGV[2])
if not cv then return {4, {}, ARGV[2]} end
local parent = cmsgpack.unpack(cv)[1]
local rows, n = {}, 0
while parent ~= '' and nopen > 0 do
  if n >= maxn then return {3, rows, rows[#rows][1]} end
  local m = ns .. '\0' .. parent
  local pcv = redis.call('HGET', KEYS[2], m)
  if not pcv then return {1, rows, parent} end
  local parts = cmsgpack.unpack(pcv)
  local wf = redis.call('ZRANGEBYLEX', KEYS[6], '[' .. m .. '\0', '(' .. m .. '\1')
  local wv = {}
  if #wf > 0 then wv = redis.call('HMGET', KEYS[5], unpack(wf)) end
  local seeds, missing, closing = {}, {}, {}
  for j = 2, #parts do
    local f = parts[j]
    local a = string.find(f, '\0', 1, true)
    local b = string.find(f, '\0', a + 1, true)
    local ch = string.sub(f, a + 1, b - 1)
    if open[ch] then
      local v = redis.call('HGET', KEYS[4], f)
      if not v then missing[#missing + 1] = f
      elseif v ~= '' then seeds[#seeds + 1] = f; seeds[#seeds + 1] = v; closing[#closing + 1] = ch
      end
    end
  end
  rows[#rows + 1] = {parent, pcv, wv, seeds, missing}
  n = n + 1
  if #missing > 0 then return {2, rows, parent} end
  for _, ch in ipairs(closing) do open[ch] = nil; nopen = nopen - 1 end
  parent = parts[1]
end
return {0, rows, ''}
end
local reply = walk()
local refs, rseen = {}, {}
for _, row in ipairs(reply[2]) do
  for _, v in ipairs(row[3]) do refs_into(v, refs, rseen) end
  for j = 2, #row[4], 2 do refs_into(row[4][j], refs, rseen) end
end
local it = items_of(refs)
reply[4], reply[5] = it[1], it[2]
return reply
"""

SCRIPTS = {
    "put": PUT,
    "put_writes": PUT_WRITES,
    "page": PAGE,
    "parts": PARTS,
    "ack_settle": ACK_SETTLE,
    "delete_parts": DELETE_PARTS,
    "delete_thread": DELETE_THREAD,
    "release": RELEASE,
    "learn_tombstones": LEARN_TOMBSTONES,
    "chain": CHAIN,
    **REGISTRY_SCRIPTS,
    **EFFECT_SCRIPTS,
}
"""Script name -> Lua source, registered once per client."""


# --------------------------------------------------------------------------- arguments


@dataclass(frozen=True)
class PutArgs:
    """KEYS/ARGV of PUT. ``keys``: ``Context.script_keys`` (thread keys, tombstones and
    its outbox stream) and the partition's thread registry (``Context.registry_of``: the
    put registers the thread there); ``expected_head``: the member the namespace's head
    must still be (``""`` = no expectation); ``new_thread``: the thread's first input
    checkpoint; ``named``: the member the put builds on (``""`` = none);
    ``checked_through_ms``: deletes up to this time (ms) were found undone in MongoDB;
    ``blobs``: ``(blob field, blob envelope)`` pairs; ``items``: digest -> stored bytes of
    the items and nodes sent along (``items.py``); ``payload``: the outbox entry."""

    keys: Sequence[str]
    max_outbox: int
    thread_id: str
    payload: bytes
    member: str
    ns: str
    record: bytes
    index: bytes
    expected_head: str
    new_thread: bool
    named: str
    checked_through_ms: int
    blobs: Sequence[tuple[str, bytes]]
    items: Mapping[bytes, bytes] = field(default_factory=dict)

    def op(self) -> Script:
        """The ``Script`` operation (ARGV in PUT's order)."""
        args: list[object] = [
            self.max_outbox, self.thread_id, self.payload, self.member, self.ns, self.record,
            self.index, self.expected_head, "1" if self.new_thread else "0", self.named,
            str(self.checked_through_ms), len(self.blobs)]
        for f, v in self.blobs:
            args += [f, v]
        for d, v in self.items.items():
            args += [d, v]
        return Script("put", list(self.keys), args)

    def checked_through(self, ms: int) -> PutArgs:
        """The same put, sent again after MongoDB showed ``named`` stored after ``ms``."""
        return replace(self, checked_through_ms=ms)

    def with_items(self, items: Mapping[bytes, bytes], payload: bytes) -> PutArgs:
        """The same put bringing ``items`` (and the outbox entry naming them)."""
        return replace(self, items=items, payload=payload)


@dataclass(frozen=True)
class PutWritesArgs:
    """KEYS/ARGV of PUT_WRITES: ``member`` is the checkpoint written to (also the one that
    must not have been deleted); ``writes``: ``(write field, envelope, overwrite)``;
    ``items`` as in ``PutArgs``."""

    keys: Sequence[str]
    max_outbox: int
    thread_id: str
    payload: bytes
    member: str
    checked_through_ms: int
    writes: Sequence[tuple[str, bytes, bool]]
    items: Mapping[bytes, bytes] = field(default_factory=dict)

    @property
    def named(self) -> str:
        """The member that must not have been deleted: the checkpoint written to."""
        return self.member

    def op(self) -> Script:
        """The ``Script`` operation (ARGV in PUT_WRITES' order)."""
        args: list[object] = [self.max_outbox, self.thread_id, self.payload, self.member,
                              str(self.checked_through_ms), len(self.writes)]
        for f, v, overwrite in self.writes:
            args += [f, v, "1" if overwrite else "0"]
        for d, v in self.items.items():
            args += [d, v]
        return Script("put_writes", list(self.keys), args)

    def checked_through(self, ms: int) -> PutWritesArgs:
        """The same writes, sent again after MongoDB showed the checkpoint stored after
        ``ms``."""
        return replace(self, checked_through_ms=ms)

    def with_items(self, items: Mapping[bytes, bytes], payload: bytes) -> PutWritesArgs:
        """The same writes bringing ``items`` (and the outbox entry naming them)."""
        return replace(self, items=items, payload=payload)


@dataclass(frozen=True)
class Refusal:
    """An error reply of PUT/PUT_WRITES: ``kind`` ``"STALE_HEAD"`` (``value``: the head's
    checkpoint_id), ``"DELETED"`` (``value``: deletion time, ms), ``"UNKNOWN"`` (Redis
    cannot tell whether the named checkpoint was deleted; ``value``: its checkpoint_id),
    ``"MISSING_ITEMS"`` (``value``: how many items a manifest names that Redis lacks) or
    ``"OUTBOX_FULL"``."""

    kind: str
    value: str

    @classmethod
    def of(cls, exc: Exception) -> Refusal | None:
        """The refusal an error reply carries, or None for any other error."""
        text = str(exc)
        for kind in ("STALE_HEAD", "DELETED", "MISSING_ITEMS", "UNKNOWN"):
            if text.startswith(kind + " "):
                return cls(kind, text.split(" ", 1)[1])
        if "OUTBOX_FULL" in text:
            return cls("OUTBOX_FULL", "")
        return None


def page_op(keys: Sequence[str], lex_max: str, lex_min: str, count: int,
            held: Iterable[bytes] = (), registry: tuple[str, str] | None = None) -> Script:
    """PAGE: up to ``count`` checkpoints between the ZREVRANGEBYLEX bounds; the items
    whose digests are in ``held`` (the caller has their bytes) are not sent back.
    ``registry``: ``(registry key, thread_id)``, so a thread Redis holds nothing of that a
    complete registry lacks is answered as absent from both tiers (complete = 3)."""
    args: list[object] = [lex_max, lex_min, count, b"".join(held)]
    if registry is None:
        return Script("page", list(keys), args)
    return Script("page", [*keys, registry[0]], [*args, registry[1]])


def parts_op(keys: Sequence[str], members: Sequence[str],
             blob_fields: Sequence[str] = ()) -> Script:
    """PARTS: the writes of ``members`` and the values of ``blob_fields``."""
    return Script("parts", list(keys), [len(members), *members, *blob_fields])


def delete_parts_op(keys: Sequence[str], tombstone_ttl_s: int, members: Sequence[str],
                    blob_fields: Sequence[str]) -> Script:
    """DELETE_PARTS (``keys``: thread keys and tombstones). Replies with the deletion
    time (ms)."""
    return Script("delete_parts", list(keys),
                  [tombstone_ttl_s, len(members), *members, *blob_fields])


def delete_thread_op(keys: Sequence[str], tombstone_ttl_s: int,
                     members: Sequence[str]) -> Script:
    """DELETE_THREAD (``keys``: thread keys and tombstones; ``members``: checkpoints only
    MongoDB may hold, tombstoned too). Replies ``[deletion time (ms), [members Redis
    held]]``."""
    return Script("delete_thread", list(keys), [tombstone_ttl_s, *members])


def learn_tombstones_op(gone: str, ttl_s: int, stones: Sequence[tuple[str, int]]) -> Script:
    """LEARN_TOMBSTONES: ``stones`` (``(field, deletion time ms)`` from MongoDB) into the
    thread's tombstones ``gone``, marked complete (``!``), expiring within ``ttl_s``."""
    args: list[object] = [ttl_s]
    for f, at in stones:
        args += [f, at]
    return Script("learn_tombstones", [gone], args)


def release_op(keys: Sequence[str], marker_ttl_s: int) -> Script:
    """RELEASE: replies with the thread's unflushed entry count (0 = released)."""
    return Script("release", list(keys), [marker_ttl_s])


def chain_op(keys: Sequence[str], ns: str, checkpoint_id: str, max_steps: int,
             channels: Sequence[str]) -> Script:
    """CHAIN from ``checkpoint_id`` for ``channels``; replies ``[status, rows, next]``."""
    return Script("chain", list(keys), [ns, checkpoint_id, max_steps, *channels])


def ack_settle_op(outbox: str, group: str, hot_ttl_s: int, hot_max_checkpoints: int,
                  per_thread: Sequence[tuple[Sequence[str], Sequence[tuple[bytes, str]]]]
                  ) -> Script:
    """ACK_SETTLE: ``per_thread`` is ``(thread keys, [(entry id, member it named)])`` per
    thread. Replies ``[acked flags in that order, outbox length]``."""
    keys: list[str] = [outbox]
    args: list[object] = [group, hot_ttl_s, hot_max_checkpoints]
    for tkeys, entries in per_thread:
        keys += list(tkeys)
        args.append(len(entries))
        for eid, m in entries:
            args += [eid, m]
    return Script("ack_settle", keys, args)


class ChainStatus(enum.IntEnum):
    """Why CHAIN stopped (its reply's first element)."""

    DONE = 0
    """Every channel has its seed, or the root was reached."""
    LEFT_REDIS = 1
    """The next ancestor is not in Redis (``next`` is its id): go on in MongoDB."""
    BLOB_MISSING = 2
    """A blob Redis lacks must be read from MongoDB (``next``: that ancestor's id)."""
    STEP_LIMIT = 3
    """The step limit was reached (``next``: the last ancestor's id)."""
    TARGET_NOT_IN_REDIS = 4
    """The target checkpoint itself is not in Redis: start from its MongoDB record."""
