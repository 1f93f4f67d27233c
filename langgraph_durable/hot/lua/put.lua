--[[
  PUT: store a checkpoint, its new channel values and items, index it, register the
  thread and append its outbox entry, all or nothing (hot/scripts.py: PutArgs, PutReply).

  Input:
    KEYS[1]  checkpoints_key  cp: member -> checkpoint record
    KEYS[2]  index_key        cv: member -> msgpack [parent checkpoint_id, blob fields...]
    KEYS[3]  members_key      idx: sorted set of members (ns NUL checkpoint_id)
    KEYS[4]  blobs_key        bl: blob field -> channel value envelope
    KEYS[5]  writes_key       w (unused)
    KEYS[6]  write_index_key  wi (unused)
    KEYS[7]  namespaces_key   ns: ns -> its first member
    KEYS[8]  meta_key         meta (born, dirty, u<member>, h<ns>, complete)
    KEYS[9]  items_key        it: digest -> item or node bytes
    KEYS[10] gone_key         the thread's tombstones: field -> deletion time (ms)
    KEYS[11] outbox_key       the thread's outbox stream (optional)
    KEYS[12] registry_key     the partition's thread registry (optional)

    ARGV[1]  max_outbox       entries the outbox stream may hold (0 = no bound)
    ARGV[2]  thread_id
    ARGV[3]  payload          the outbox entry's payload (OutboxEntry)
    ARGV[4]  member           ns NUL checkpoint_id of the new checkpoint
    ARGV[5]  ns               checkpoint_ns
    ARGV[6]  record           the checkpoint record
    ARGV[7]  index            its cv entry
    ARGV[8]  expected_head    the member the namespace's head must still be ('' = none)
    ARGV[9]  new_thread       '1': the thread's first input checkpoint
    ARGV[10] named            the parent member ('' = none): refused when deleted
    ARGV[11] checked_through  ms: deletes up to this time were found undone in MongoDB
    ARGV[12] n_blobs          the number of blob field/value pairs that follow
    ARGV[13..12+2n]           blob field/value pairs
    ARGV[13+2n..]             item digest/value pairs

  A new member below the namespace's largest one (clock skew) is stored as InMemorySaver
  stores it. With the new-thread flag on a thread Redis holds nothing of (or only pending
  writes of, when the complete thread registry lacks it), meta 'complete' = 1: Redis holds
  the whole thread, so reads need not ask MongoDB about what Redis lacks (PAGE).

  Output:
    the outbox entry id ('ok' without an outbox), or {entry id, the namespace's largest
    checkpoint_id} when the new member sorts below it.

  Errors:
    OUTBOX_FULL                 the outbox stream holds max_outbox entries
    DELETED <ms>                the parent was deleted at that time (see deleted_ref)
    UNKNOWN <checkpoint_id>     Redis cannot tell whether the parent was deleted
    STALE_HEAD <checkpoint_id>  another run extended the namespace meanwhile: the head (the
                                member PUT last wrote there, meta 'h' .. ns; not its largest
                                checkpoint_id: hosts' clocks differ) is that one
    MISSING_ITEMS <count>       a manifest names items Redis lacks and the call does not
                                bring: send again with every item
]]
local rcall = redis.call
local checkpoints_key, index_key, members_key, blobs_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local namespaces_key, meta_key, items_key = KEYS[7], KEYS[8], KEYS[9]
local gone_key, outbox_key, registry_key = KEYS[10], KEYS[11], KEYS[12]

--- @include "items"
--- @include "registry"
--- @include "outbox_bound"
--- @include "deleted_ref"
--- @include "persist_and_outbox"

local thread_id, member, ns = ARGV[2], ARGV[4], ARGV[5]
if outbox_full(outbox_key, ARGV[1]) then return redis.error_reply('OUTBOX_FULL') end
local refusal = deleted_refusal(checkpoints_key, gone_key, registry_key, ARGV[10], ARGV[11],
                                thread_id)
if refusal then return refusal end
if ARGV[8] ~= '' then
  local head = rcall('HGET', meta_key, 'h' .. ns)
  if head and head ~= ARGV[8] and head ~= member then
    -- the reply carries the head's checkpoint_id only (an error string ends at a NUL)
    return redis.error_reply('STALE_HEAD ' .. string.sub(head, #ns + 2))
  end
end
local newer = false
if rcall('HEXISTS', checkpoints_key, member) == 0 then
  local above = rcall('ZREVRANGEBYLEX', members_key, '(' .. ns .. '\1', '(' .. member,
                      'LIMIT', 0, 1)
  if #above > 0 then newer = string.sub(above[1], #ns + 2) end
end
local last = 12 + 2 * tonumber(ARGV[12])
local sent = {}
for i = last + 1, #ARGV, 2 do sent[ARGV[i]] = ARGV[i + 1] end
local missing = missing_items(items_key, 14, last, 2, sent)
if missing > 0 then return redis.error_reply('MISSING_ITEMS ' .. missing) end
if ARGV[9] == '1' and (rcall('EXISTS', meta_key) == 0
    or new_in_registry(registry_key, members_key, thread_id)) then
  rcall('HSET', meta_key, 'complete', 1)
end
if never_stored(registry_key, thread_id) then  -- no tier holds a checkpoint or a tombstone
  -- of the thread: its tombstones are all in Redis (none), so writes naming a checkpoint
  -- Redis lacks need no MongoDB (as LEARN_TOMBSTONES marks them; expires as tombstones
  -- do: TOMBSTONE_TTL_S)
  rcall('HSET', gone_key, '!', 1)
  if rcall('TTL', gone_key) < 0 then rcall('EXPIRE', gone_key, 604800) end
end
rcall('HSET', checkpoints_key, member, ARGV[6])
rcall('HSET', index_key, member, ARGV[7])
rcall('ZADD', members_key, 0, member)
rcall('HSETNX', namespaces_key, ns, member)
rcall('HSET', meta_key, 'h' .. ns, member)
for i = last + 1, #ARGV, 2 do rcall('HSETNX', items_key, ARGV[i], ARGV[i + 1]) end
for i = 13, last, 2 do rcall('HSET', blobs_key, ARGV[i], ARGV[i + 1]) end
if registry_key then rcall('HSET', registry_key, thread_id, 1) end
local entry = persist_and_outbox(meta_key, gone_key, member, outbox_key, thread_id, ARGV[3])
if newer then return {entry, newer} end
return entry
