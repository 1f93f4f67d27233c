--[[
  DEAD_REPLAY: put a dead letter's entry back in its thread's outbox partition stream
  once, however many replays of that dead letter run (two operators, a retried command, a
  process that died before deleting the dead letter). The dead-letter stream is in
  another slot than the partitions (hot/keys.py), so the claim lives in the thread's
  meta (field 'r' .. dead letter id, value: the replay's time in ms), written in the
  same step as the XADD: a second replay finds it and adds nothing. The claim stays as
  long as the thread's keys (deleted with them): a replay that listed the dead letter
  before it was deleted still finds it. (hot/scripts.py: DeadReplayArgs,
  DeadReplayReply; outbox/dead.py: replay_plan.)

  Input:
    KEYS[1]  outbox_key       the thread's outbox partition stream
    KEYS[2]  meta_key         the thread's meta (same slot as KEYS[1] on a cluster)

    ARGV[1]  dead_id          the dead letter's id in the dead-letter stream
    ARGV[2]  entry_ms         the original entry's time (ms, its stream id's first part)
    ARGV[3]  now_ms           the replay's time (ms), kept in the claim
    ARGV[4..]                 the entry's fields: field, value pairs

  Output:
    {status, new entry id or ''}: status 'ADDED' (id: the new entry), 'REPLAYED' (a
    replay of this dead letter added it before), 'GONE' (Redis no longer holds the
    thread: meta without 'born'), 'NEWER' (meta 'born' after entry_ms: the thread was
    deleted and written again since)

  Errors: a meta of another type raises WRONGTYPE (nothing written).
]]
local rcall = redis.call
local outbox_key, meta_key = KEYS[1], KEYS[2]

local born = rcall('HGET', meta_key, 'born')
if not born then return {'GONE', ''} end
if tonumber(born) > tonumber(ARGV[2]) then return {'NEWER', ''} end
if rcall('HSETNX', meta_key, 'r' .. ARGV[1], ARGV[3]) == 0 then return {'REPLAYED', ''} end
return {'ADDED', rcall('XADD', outbox_key, '*', unpack(ARGV, 4))}
