--[[
  STORE_PUT: write one version of a memory-store item (a value, a delete, a TTL refresh
  or a sweep's expiry) and its outbox entry, all or nothing (hot/store_scripts.py: StorePutArgs,
  StorePutReply; the record format: core/store_records.py). The item key, the partition's
  unflushed index, its clock and its outbox stream share one hash tag (hot/store_scripts.py), so
  the script is legal on a Redis Cluster.

  Input:
    KEYS[1]  item_key     the item's record (string; no TTL while unflushed)
    KEYS[2]  dirty_key    the partition's unflushed index: field -> record
    KEYS[3]  clock_key    the partition's last seq (us), so seqs only grow
    KEYS[4]  outbox_key   the partition's outbox stream

    ARGV[1]  max_outbox   entries the outbox stream may hold (0 = no bound)
    ARGV[2]  tid          the entry's thread field (core/store_records.py: store_tid)
    ARGV[3]  field        the item's field (namespace NUL key)
    ARGV[4]  mode         'put' (a value), 'del' (a delete), 'touch' (a TTL refresh:
                          keeps the value and its times), 'expire' (the sweep: a delete
                          that happens only if the item is still the version ARGV[7]) or
                          'import' (a value with the times ARGV[8], ARGV[9] it had where
                          it was exported: cli/store_transfer.py)
    ARGV[5]  expires_ms   when the new version expires (0 = never)
    ARGV[6]  body         the client's body (empty for a delete)
    ARGV[7]  expect       'touch'/'expire': the seq the item must still have; for an item
                          Redis does not hold, the version read from MongoDB
    ARGV[8]  cseq         'touch' of an item Redis does not hold, 'import': its cseq
    ARGV[9]  useq         'touch' of an item Redis does not hold, 'import': its useq
    ARGV[10] payload      the outbox entry's payload (OutboxEntry)
    ARGV[11] now_ms       the client's clock (ms): a value that expired by then is gone,
                          so a put of it starts a new incarnation (a new cseq)

  A 'put' of an item Redis holds no record of is written with dead = '2' (a value whose
  incarnation Redis cannot tell): MongoDB may hold a live version (flushed, then out of
  the hot window), whose cseq the flusher keeps (plans/store_items.py: flush_store_plan).

  Output:
    {seq, cseq, useq} of the version written (as strings), or {} when a 'touch' or an
    'expire' found a newer version (nothing written).

  Errors:
    OUTBOX_FULL   the outbox stream holds max_outbox entries
]]
local rcall = redis.call
local item_key, dirty_key, clock_key, outbox_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]

--- @include "outbox_bound"

if outbox_full(outbox_key, ARGV[1]) then return redis.error_reply('OUTBOX_FULL') end
local mode, field = ARGV[4], ARGV[3]
local old = rcall('GET', item_key)
local old_seq, old_cseq, old_useq, old_dead, old_flag
if old then
  old_seq = tonumber(string.sub(old, 1, 16))
  old_cseq = tonumber(string.sub(old, 17, 32))
  old_useq = tonumber(string.sub(old, 33, 48))
  old_flag = string.sub(old, 49, 49)
  old_dead = old_flag == '1'
  local old_exp = tonumber(string.sub(old, 50, 65))
  if old_exp > 0 and old_exp <= tonumber(ARGV[11]) then old_dead = true end
end
if mode == 'touch' or mode == 'expire' then
  if old and old_seq ~= tonumber(ARGV[7]) then return {} end
  if mode == 'touch' and old and old_dead then return {} end
end
local clock = rcall('TIME')
local seq = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local last = tonumber(rcall('GET', clock_key) or '0')
if seq <= last then seq = last + 1 end
rcall('SET', clock_key, string.format('%.0f', seq))
local cseq, useq, dead, body = seq, seq, '0', ARGV[6]
if mode == 'put' then
  if old and not old_dead then cseq, dead = old_cseq, old_flag end
  if not old then dead = '2' end  -- MongoDB may hold it: the flusher keeps its cseq
elseif mode == 'touch' then
  if old then
    cseq, useq, body, dead = old_cseq, old_useq, string.sub(old, 66), old_flag
  else
    cseq, useq = tonumber(ARGV[8]), tonumber(ARGV[9])
  end
elseif mode == 'import' then
  cseq, useq = tonumber(ARGV[8]), tonumber(ARGV[9])
else
  dead, body = '1', ''
end
local record = string.format('%016.0f%016.0f%016.0f%s%016.0f', seq, cseq, useq, dead,
                             tonumber(ARGV[5])) .. body
rcall('SET', item_key, record)
rcall('HSET', dirty_key, field, record)
rcall('XADD', outbox_key, '*', 't', ARGV[2], 'p', ARGV[10])
return {string.format('%.0f', seq), string.format('%.0f', cseq), string.format('%.0f', useq)}
