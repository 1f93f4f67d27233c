--[[
  ACK_SETTLE: acknowledge and delete flushed outbox entries and settle their threads in
  one atomic step, so no crash can land between the two (a thread whose entries left the
  outbox with its 'dirty' count never lowered would keep its hot keys forever). One call
  per outbox partition: its stream and its threads share one slot, on a cluster too
  (hot/keys.py). (hot/scripts.py: ack_settle_op, AckSettleReply.)

  Settling a thread lowers its 'dirty' count and each checkpoint's unflushed count (meta
  field 'u' .. member); once nothing is left to flush, its hot keys expire after ttl
  seconds (0 = keep). Then the hot window: in each namespace the entries touched, once it
  holds maxhot + slack (max(16, maxhot / 2)) checkpoints, keep the newest maxhot (0 = all)
  and those with unflushed entries; older ones leave Redis (record, index, pending writes,
  and the channel values no kept checkpoint names) and are read from MongoDB. Only entries
  of this generation of the thread (meta 'born') count: an older one's were written
  before a delete_thread. An entry flagged counted (a replayed 'settle' dead letter whose
  first settle had lowered the counts before it failed: outbox/dead.py) lowers nothing
  again; its namespace's hot window is trimmed all the same.

  Input:
    KEYS[1]  outbox_key       the partition's outbox stream
    KEYS[2..10], KEYS[11..19], ...
                              the nine thread keys (ThreadKeys.all: cp, cv, idx, bl, w,
                              wi, ns, meta, it) of each thread in ARGV order; a thread's
                              keys are KEYS[base..base+8] in settle() and trim()

    ARGV[1]  group            the consumer group
    ARGV[2]  ttl              hot ttl (s) of a settled thread's keys (0 = keep)
    ARGV[3]  maxhot           checkpoints kept per namespace (0 = all)
    then per thread: k, then its k (entry id, member it named, counted 1/0) triples

  Output:
    {{1/0 per entry id in ARGV order: acknowledged by this call}, outbox length,
     {thread no (1-based, ARGV order), error text, ...}: threads whose settle failed,
     {thread no, ...}: those of them whose counts were lowered before the failure}

  Errors: none of its own. A thread whose settle fails (a damaged key: WRONGTYPE, an
  undecodable 'cv' index) is named in the third element; its entries are acknowledged
  and deleted all the same (their records are in MongoDB) and the other threads are
  settled: one damaged thread never blocks the partition (the flusher dead-letters the
  named thread's entries so an operator sees them).
]]
local rcall = redis.call
local outbox_key = KEYS[1]

local function trim(base, ns, maxn)
  -- only once maxn + slack are held: the kept checkpoints' indexes are read once per
  -- slack new checkpoints, not at every settle
  local slack = math.max(16, math.floor(maxn / 2))
  if rcall('ZLEXCOUNT', KEYS[base + 2], '[' .. ns .. '\0', '(' .. ns .. '\1')
      <= maxn + slack then return end
  local members = rcall('ZREVRANGEBYLEX', KEYS[base + 2], '(' .. ns .. '\1',
                        '[' .. ns .. '\0')
  local keep, evict = {}, {}
  for i, m in ipairs(members) do
    local cv = rcall('HGET', KEYS[base + 1], m)
    if i <= maxn or rcall('HEXISTS', KEYS[base + 7], 'u' .. m) == 1 then
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
  if rcall('HGET', KEYS[base + 7], 'complete') == '1' then
    rcall('HSET', KEYS[base + 7], 'complete', 2)
  end
  for _, e in ipairs(evict) do
    local m, cv = e[1], e[2]
    rcall('HDEL', KEYS[base], m)
    rcall('HDEL', KEYS[base + 1], m)
    rcall('ZREM', KEYS[base + 2], m)
    local wf = rcall('ZRANGEBYLEX', KEYS[base + 5], '[' .. m .. '\0', '(' .. m .. '\1')
    for i = 1, #wf, 1000 do
      local part = {unpack(wf, i, math.min(i + 999, #wf))}
      rcall('HDEL', KEYS[base + 4], unpack(part))
      rcall('ZREM', KEYS[base + 5], unpack(part))
    end
    if cv then
      local p = cmsgpack.unpack(cv)
      for j = 2, #p do
        if not keep[p[j]] then rcall('HDEL', KEYS[base + 3], p[j]) end
      end
    end
  end
end
local lowered = false  -- set by settle() before its first write of a count
local function settle(base, done, ttl, maxhot)
  local meta = KEYS[base + 7]
  if rcall('EXISTS', meta) == 0 then return 0 end  -- thread deleted meanwhile
  local born = tonumber(rcall('HGET', meta, 'born') or '0')
  local n, mine, nss = 0, 0, {}
  for _, e in ipairs(done) do
    if e[1] >= born then
      mine = mine + 1
      if not e[3] then
        n = n + 1
        lowered = true
        local f = 'u' .. e[2]
        if rcall('HINCRBY', meta, f, -1) <= 0 then rcall('HDEL', meta, f) end
      end
      local cut = string.find(e[2], '\0', 1, true)
      if cut then nss[string.sub(e[2], 1, cut - 1)] = true end
    end
  end
  if mine == 0 then return -1 end
  local left = tonumber(rcall('HGET', meta, 'dirty') or '0')
  if n > 0 then
    left = rcall('HINCRBY', meta, 'dirty', -n)
    if left <= 0 then
      rcall('HSET', meta, 'dirty', 0)
      if ttl > 0 then
        for j = base, base + 8 do rcall('EXPIRE', KEYS[j], ttl) end
      end
    end
  end
  if maxhot > 0 then
    for ns in pairs(nss) do trim(base, ns, maxhot) end
  end
  return left
end

local group, ttl, maxhot = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local acked, ids, unsettled, counted = {}, {}, {}, {}
local a, base, no = 4, 2, 0
while a <= #ARGV do
  no = no + 1
  local k = tonumber(ARGV[a])
  local done = {}
  for i = a + 1, a + 3 * k, 3 do
    local ok = rcall('XACK', outbox_key, group, ARGV[i])
    acked[#acked + 1] = ok
    ids[#ids + 1] = ARGV[i]
    if ok == 1 then
      done[#done + 1] = {tonumber(string.match(ARGV[i], '^%d+')), ARGV[i + 1],
                         ARGV[i + 2] == '1'}
    end
  end
  if #done > 0 then
    lowered = false
    local ok, err = pcall(settle, base, done, ttl, maxhot)
    if not ok then
      unsettled[#unsettled + 1] = no
      unsettled[#unsettled + 1] = type(err) == 'table' and tostring(err.err) or tostring(err)
      if lowered then counted[#counted + 1] = no end
    end
  end
  a, base = a + 3 * k + 1, base + 9
end
for i = 1, #ids, 1000 do
  rcall('XDEL', outbox_key, unpack(ids, i, math.min(i + 999, #ids)))
end
return {acked, rcall('XLEN', outbox_key), unsettled, counted}
