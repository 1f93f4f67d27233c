--[[
  RELEASE: drop a thread's hot keys once everything in them is in MongoDB, so its reads
  go to MongoDB (copy_thread and import wrote there). Refused while entries are unflushed
  (the caller waits for the flusher and tries again). A fresh meta stays as a marker for
  ttl seconds: the next put then finds the thread not new, so Redis is never taken as
  holding the whole thread (no 'complete', see PUT). (hot/scripts.py: release_op.)

  Input:
    KEYS[1..9]                the nine thread keys (ThreadKeys.all); KEYS[8] meta_key

    ARGV[1]  ttl              the marker's ttl (s)

  Output:
    the thread's unflushed count (meta 'dirty'; the keys stay), or 0 when released

  Errors: none of its own.
]]
local rcall = redis.call
local meta_key = KEYS[8]

local dirty = tonumber(rcall('HGET', meta_key, 'dirty') or '0')
if dirty > 0 then return dirty end
rcall('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9])
rcall('HSET', meta_key, 'released', 1)
rcall('EXPIRE', meta_key, tonumber(ARGV[1]))
return 0
