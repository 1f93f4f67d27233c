--[[
  PUT_WRITES: store a task's pending writes of a checkpoint and their items, and append
  the outbox entry, all or nothing (hot/scripts.py: PutWritesArgs, PutWritesReply).

  Input:
    KEYS[1]  checkpoints_key  cp: member -> checkpoint record
    KEYS[2..4]                cv, idx, bl (unused)
    KEYS[5]  writes_key       w: write field -> write envelope
    KEYS[6]  write_index_key  wi: sorted set of write fields
    KEYS[7]                   ns (unused)
    KEYS[8]  meta_key         meta (born, dirty, u<member>)
    KEYS[9]  items_key        it: digest -> item or node bytes
    KEYS[10] gone_key         the thread's tombstones: field -> deletion time (ms)
    KEYS[11] outbox_key       the thread's outbox stream (optional)
    KEYS[12] registry_key     the partition's thread registry (optional)

    ARGV[1]  max_outbox       entries the outbox stream may hold (0 = no bound)
    ARGV[2]  thread_id
    ARGV[3]  payload          the outbox entry's payload (OutboxEntry)
    ARGV[4]  member           the checkpoint written to: refused when deleted
    ARGV[5]  checked_through  ms: deletes up to this time were found undone in MongoDB
    ARGV[6]  n_writes         the number of triples that follow
    ARGV[7..6+3n]             (write field, envelope, overwrite '0'/'1') triples: ordinary
                              writes are insert-once (HSETNX), special channels overwrite
    ARGV[7+3n..]              item digest/value pairs

  Output:
    the outbox entry id ('ok' without an outbox).

  Errors:
    OUTBOX_FULL, DELETED <ms>, UNKNOWN <checkpoint_id>, MISSING_ITEMS <count> as PUT.
]]
local rcall = redis.call
local checkpoints_key, writes_key, write_index_key = KEYS[1], KEYS[5], KEYS[6]
local meta_key, items_key, gone_key = KEYS[8], KEYS[9], KEYS[10]
local outbox_key, registry_key = KEYS[11], KEYS[12]

--- @include "items"
--- @include "registry"
--- @include "outbox_bound"
--- @include "deleted_ref"
--- @include "persist_and_outbox"

local thread_id, member = ARGV[2], ARGV[4]
if outbox_full(outbox_key, ARGV[1]) then return redis.error_reply('OUTBOX_FULL') end
local refusal = deleted_refusal(checkpoints_key, gone_key, registry_key, member, ARGV[5],
                                thread_id)
if refusal then return refusal end
local last = 6 + 3 * tonumber(ARGV[6])
local sent = {}
for i = last + 1, #ARGV, 2 do sent[ARGV[i]] = ARGV[i + 1] end
local missing = missing_items(items_key, 8, last, 3, sent)
if missing > 0 then return redis.error_reply('MISSING_ITEMS ' .. missing) end
for i = last + 1, #ARGV, 2 do rcall('HSETNX', items_key, ARGV[i], ARGV[i + 1]) end
for i = 7, last, 3 do
  if ARGV[i + 2] == '1' then
    rcall('HSET', writes_key, ARGV[i], ARGV[i + 1])
  else
    rcall('HSETNX', writes_key, ARGV[i], ARGV[i + 1])
  end
  rcall('ZADD', write_index_key, 0, ARGV[i])
end
return persist_and_outbox(meta_key, gone_key, member, outbox_key, thread_id, ARGV[3])
