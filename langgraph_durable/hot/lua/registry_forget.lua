--[[
  REGISTRY_FORGET: mark a thread deleted ('d') in its registry once Redis holds no key of
  it: after delete_thread removed both tiers. A read takes it for absent (no tier holds
  it), a write naming a checkpoint Redis lacks still asks for its tombstones (the field is
  kept: a thread the registry never saw has none). A put that ran since made keys again
  and keeps it registered. (hot/registry_scripts.py: forget_op.)

  Input:
    KEYS[1..9]                the nine thread keys (ThreadKeys.all)
    KEYS[10] registry_key     the partition's thread registry

    ARGV[1]  thread_id

  Output:
    1 if marked, else 0

  Errors: none of its own.
]]
local rcall = redis.call
local registry_key = KEYS[10]

if rcall('EXISTS', unpack(KEYS, 1, 9)) > 0 then return 0 end
if rcall('HGET', registry_key, ARGV[1]) ~= '1' then return 0 end
rcall('HSET', registry_key, ARGV[1], 'd')
return 1
