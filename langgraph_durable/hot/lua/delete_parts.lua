--[[
  DELETE_PARTS: remove checkpoints (members), their pending writes and the given blob
  fields from the thread, and leave a tombstone per member and field (gone_key: field ->
  deletion time in ms, for ttl seconds) so a flusher that wrote an older copy after this
  (a stalled round) is fenced: deleted from MongoDB again, and a late write naming one is
  refused (deleted_ref). A namespace whose head (meta 'h' .. ns, see PUT) was removed has
  none until the next put. (hot/scripts.py: delete_parts_op.)

  Input:
    KEYS[1]  checkpoints_key  cp
    KEYS[2]  index_key        cv
    KEYS[3]  members_key      idx
    KEYS[4]  blobs_key        bl
    KEYS[5]  writes_key       w
    KEYS[6]  write_index_key  wi
    KEYS[7]                   ns (unused)
    KEYS[8]  meta_key         meta (h<ns>)
    KEYS[9]                   it (unused)
    KEYS[10] gone_key         the thread's tombstones
    KEYS[11] outbox_key       the thread's outbox stream (optional: its last id's time
                              stamps the tombstones when later than the clock)

    ARGV[1]  ttl              tombstone ttl (s)
    ARGV[2]  n                the number of members that follow
    ARGV[3..n+2]              members
    ARGV[n+3..]               blob fields

  Output:
    the deletion time (ms, Redis clock)

  Errors: none of its own.
]]
local rcall = redis.call
local checkpoints_key, index_key, members_key, blobs_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local writes_key, write_index_key, meta_key, gone_key = KEYS[5], KEYS[6], KEYS[8], KEYS[10]

--- @include "now_ms"

local now = delete_ms(KEYS[11])
local n = tonumber(ARGV[2])
for i = 3, n + 2 do
  local m = ARGV[i]
  rcall('HDEL', checkpoints_key, m)
  rcall('HDEL', index_key, m)
  rcall('ZREM', members_key, m)
  local wf = rcall('ZRANGEBYLEX', write_index_key, '[' .. m .. '\0', '(' .. m .. '\1')
  if #wf > 0 then
    rcall('HDEL', writes_key, unpack(wf))
    rcall('ZREM', write_index_key, unpack(wf))
  end
  rcall('HSET', gone_key, m, now)
  local cut = string.find(m, '\0', 1, true)  -- the namespace's head (see PUT) is gone
  if cut and rcall('HGET', meta_key, 'h' .. string.sub(m, 1, cut - 1)) == m then
    rcall('HDEL', meta_key, 'h' .. string.sub(m, 1, cut - 1))
  end
end
for i = n + 3, #ARGV do
  rcall('HDEL', blobs_key, ARGV[i])
  rcall('HSET', gone_key, ARGV[i], now)
end
rcall('EXPIRE', gone_key, tonumber(ARGV[1]))
return now
