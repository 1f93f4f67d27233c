--[[
  LEARN_TOMBSTONES: the tombstones of a thread loaded from MongoDB (plans/tombstones.py),
  after a write Redis could not answer for (UNKNOWN, see deleted_ref): each field/time
  pair set unless Redis holds one (a tombstone Redis holds is from a delete since Redis
  last lost its data: never older than MongoDB's), then field '!' = 1: Redis now holds
  every tombstone of the thread, so a write naming a checkpoint it neither holds nor has a
  tombstone of (a task's writes arriving before their checkpoint's put) is taken without
  asking MongoDB. The hash, '!' with it, expires after at most ttl seconds (kept when it
  expires sooner). (hot/scripts.py: learn_tombstones_op.)

  Input:
    KEYS[1]  gone_key         the thread's tombstones

    ARGV[1]  ttl              at most this many seconds to live (s)
    ARGV[2..]                 field/deletion time (ms) pairs

  Output:
    1

  Errors: none of its own.
]]
local rcall = redis.call
local gone_key = KEYS[1]

for i = 2, #ARGV, 2 do rcall('HSETNX', gone_key, ARGV[i], ARGV[i + 1]) end
rcall('HSET', gone_key, '!', 1)
local left = rcall('TTL', gone_key)
if left < 0 or left > tonumber(ARGV[1]) then rcall('EXPIRE', gone_key, tonumber(ARGV[1])) end
return 1
