--[[
  COLLECT_ITEMS: remove items (and nodes) a prune found no stored value names, unless the
  thread was written since the prune read its generation and writes count (meta 'born'
  and 'writes'): a put or put_writes since may name one of them without sending it again
  (Redis held it, so the put did not), and MongoDB's copy of it, which the prune judged
  by, does not say so. Then nothing is removed, and the next prune collects them.
  (hot/scripts.py: collect_items_op; plans/history_edits.py: _collect_items_plan.)

  Input:
    KEYS[1]  meta_key         meta ('born': the generation; 'writes': its writes, counted
                              by PUT and PUT_WRITES)
    KEYS[2]  items_key        it: digest -> item or node bytes

    ARGV[1]  seen             meta 'born' and 'writes' as the prune read them, joined by
                              ':' ('' for one absent): a delete_thread and a new run
                              since start the count again, in a later generation
    ARGV[2..]                 the digests to remove

  Output:
    the number of items removed, or -1 when the thread was written since (none removed)

  Errors: none of its own.
]]
local rcall = redis.call
local meta_key, items_key = KEYS[1], KEYS[2]

local now = (rcall('HGET', meta_key, 'born') or '') .. ':'
  .. (rcall('HGET', meta_key, 'writes') or '')
if now ~= ARGV[1] then return -1 end  -- written since: keep them all
local removed = 0
for i = 2, #ARGV, 1000 do
  removed = removed + rcall('HDEL', items_key, unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
return removed
