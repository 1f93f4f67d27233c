--[[
  BIND: record the binding of a key prefix to one MongoDB database, collection_prefix
  and number of outbox partitions unless one exists (a binding an older version recorded
  without 'partitions' gets it now). (hot/binding_scripts.py: BindArgs,
  Binding; plans/binding.py: bind_plan.)

  Input:
    KEYS[1]  binding_key      {<prefix>:binding}

    ARGV[1]  database
    ARGV[2]  collection_prefix
    ARGV[3]  by               the process recording it
    ARGV[4]  at               ms since the epoch
    ARGV[5]  partitions       the number of outbox partitions

  Output:
    the stored {database, collection_prefix, by, at, partitions} (nil for a missing one)

  Errors: none of its own.
]]
local rcall = redis.call
local binding_key = KEYS[1]

if rcall('EXISTS', binding_key) == 0 then
  rcall('HSET', binding_key, 'database', ARGV[1], 'collection_prefix', ARGV[2],
        'by', ARGV[3], 'at', ARGV[4], 'partitions', ARGV[5])
else
  rcall('HSETNX', binding_key, 'partitions', ARGV[5])
end
return rcall('HMGET', binding_key, 'database', 'collection_prefix', 'by', 'at', 'partitions')
