--[[
  EFFECT_BEGIN: look up an effect in the thread's journal and, when Redis can tell it has
  none, mark it started (hot/effect_scripts.py: begin_op, BeginReply).

  Input:
    KEYS[1]  journal_key      the thread's effect journal (ThreadKeys.fx)
    KEYS[2]  meta_key         the thread's meta (born, dirty, fx, complete)
    KEYS[3]  outbox_key       the thread's outbox stream
    KEYS[4]  gone_key         the thread's tombstones (the first write after a delete
                              stamps its generation after them)

    ARGV[1]  field            task_ns NUL task_id NUL name NUL n
    ARGV[2]  body             the started entry's body (state letter and msgpack)
    ARGV[3]  payload          the outbox entry's payload (OutboxEntry)
    ARGV[4]  max_outbox       entries the outbox stream may hold (0 = no bound)
    ARGV[5]  floor            version floor (from MongoDB; 0)
    ARGV[6]  thread_id
    ARGV[7]  checked          '1': MongoDB was asked and holds no live entry
    ARGV[8]  known            the entry MongoDB holds ('' = none)
    ARGV[9]  hot_ttl          s: the journal's ttl when this call creates it from MongoDB's

  Output:
    {'found', entry} | {'new', entry} | {'ask'} (Redis cannot tell: ask MongoDB, then call
    again with checked = '1')

  Errors:
    OUTBOX_FULL               the outbox stream holds max_outbox entries
]]
local rcall = redis.call
local journal_key, meta_key, outbox_key = KEYS[1], KEYS[2], KEYS[3]

--- @include "effect_store"

local cur = rcall('HGET', journal_key, ARGV[1])
if cur and string.sub(cur, 9, 9) ~= 'c' then return {'found', cur} end
if ARGV[8] ~= '' then  -- MongoDB holds it: keep it here too (it is flushed already)
  local fresh = rcall('EXISTS', journal_key) == 0
  rcall('HSET', journal_key, ARGV[1], ARGV[8])
  if fresh and tonumber(ARGV[9]) > 0 then rcall('EXPIRE', journal_key, tonumber(ARGV[9])) end
  return {'found', ARGV[8]}
end
local trusted = cur ~= false or ARGV[7] == '1'
  or rcall('HEXISTS', journal_key, '!') == 1
if not trusted and rcall('EXISTS', journal_key) == 0
    and rcall('HEXISTS', meta_key, 'fx') == 0 then
  local c = rcall('HGET', meta_key, 'complete')
  if c == '1' or c == '2' then  -- the thread started here and Redis holds all of it
    rcall('HSET', journal_key, '!', 1)
    trusted = true
  end
end
if not trusted then return {'ask'} end
local max = tonumber(ARGV[4])
if max > 0 and rcall('XLEN', outbox_key) >= max then
  return redis.error_reply('OUTBOX_FULL')
end
return {'new', store(journal_key, meta_key, outbox_key, ARGV[1], ARGV[2], ARGV[3])}
