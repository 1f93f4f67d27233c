--[[
  LAST_NODE: the last of some digests that is a stored node, read from the end; a field
  is read (HGET) only when its length is a node's.
  (hot/flusher_scripts.py: LastNodeArgs; outbox/round_summaries.py:
  summary_facts_plan, in a pipeline as EVAL.)

  Input:
    KEYS[1]  items_key        hash: digest -> stored item or node

    ARGV[1]  node_bytes       the length of a stored node
    ARGV[2]  node_magic       the first bytes of a stored node
    ARGV[3..]                 digests, in list order

  Output:
    the place among ARGV[3..] (1-based) of the last stored node, 0: none is,
    -1: a field after it is not in the hash

  Errors: none of its own.
]]
local rcall = redis.call
local items_key = KEYS[1]

local size, magic = tonumber(ARGV[1]), ARGV[2]
for i = #ARGV, 3, -1 do
  local n = rcall('HSTRLEN', items_key, ARGV[i])
  if n == 0 then return -1 end
  if n == size and string.sub(rcall('HGET', items_key, ARGV[i]), 1, #magic) == magic then
    return i - 2
  end
end
return 0
