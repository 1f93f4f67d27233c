--[[
  STORE_GET: the record of one memory-store item (hot/store_scripts.py: store_get_op). A script,
  not a GET, so that the reads of many asyncio tasks share one pipeline with the other
  scripts of the same loop turn (io/coalesce.py), as the saver's reads do.

  Input:
    KEYS[1]  item_key   the item's record
    ARGV: none

  Output:
    the record, or false (nil) when Redis holds none

  Errors: none of its own.
]]
local rcall = redis.call
return rcall('GET', KEYS[1])
