--[[
  DELETE_THREAD: remove every key of the thread; tombstone '*' and every checkpoint it
  held (each member of the index, plus ARGV[2..]: those only MongoDB holds), so a late
  write naming one of them is refused (deleted_ref). (hot/scripts.py: delete_thread_op,
  DeleteThreadReply.)

  Input:
    KEYS[1..9]                the nine thread keys (ThreadKeys.all); KEYS[3] members_key
                              (idx) lists the members Redis holds
    KEYS[10] gone_key         the thread's tombstones
    KEYS[11] outbox_key       the thread's outbox stream (optional: its last id's time
                              stamps the tombstones when later than the clock)

    ARGV[1]  ttl              tombstone ttl (s)
    ARGV[2..]                 members only MongoDB may hold

  Output:
    {deletion time (ms, Redis clock), {the members Redis held}}

  Errors: none of its own. A thread key of another type is deleted like the others (the
  members then come from the record hash, or none when it is damaged too); a tombstones
  key of another type is replaced.
]]
local rcall = redis.call
local members_key, gone_key = KEYS[3], KEYS[10]

--- @include "now_ms"

local now = delete_ms(KEYS[11])
-- a damaged key (another type: a hand edit, a foreign tool) never keeps a thread from
-- being deleted: the members come from the record hash when the index is damaged, and
-- a tombstones key of another type is replaced
local held = {}
if rcall('TYPE', members_key).ok == 'zset' then
  held = rcall('ZRANGE', members_key, 0, -1)
elseif rcall('TYPE', KEYS[1]).ok == 'hash' then
  held = rcall('HKEYS', KEYS[1])
end
local gone_type = rcall('TYPE', gone_key).ok
if gone_type ~= 'hash' and gone_type ~= 'none' then rcall('DEL', gone_key) end
for i = 1, #held, 1000 do
  local pairs = {}
  for j = i, math.min(i + 999, #held) do pairs[#pairs + 1] = held[j]; pairs[#pairs + 1] = now end
  rcall('HSET', gone_key, unpack(pairs))
end
for i = 2, #ARGV do rcall('HSET', gone_key, ARGV[i], now) end
rcall('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9])
rcall('HSET', gone_key, '*', now)
rcall('EXPIRE', gone_key, tonumber(ARGV[1]))
return {now, held}
