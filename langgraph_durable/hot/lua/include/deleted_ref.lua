--- @include "registry"
-- deleted_refusal(checkpoints_key, gone_key, registry_key, named, checked_through,
--   thread_id): the error reply refusing a write that names a deleted checkpoint, or nil
--   to take the write.
-- named: the member (a put's parent, put_writes' checkpoint, a subgraph's enclosing
-- checkpoint; '' = none) that Redis does not hold (checkpoints_key) and that a delete
-- tombstoned (gone_key: every delete leaves a tombstone per checkpoint it removed, so a
-- checkpoint not stored *yet* is never taken for a deleted one) gets
-- 'DELETED <deletion time ms>' when that time is later than checked_through (ms; the
-- caller found in MongoDB a checkpoint of that id stored after a delete of that time, by
-- copy_thread or an import, and sends again). A member Redis neither holds nor has a
-- tombstone of is taken when the tombstones hold field '!' (they hold every tombstone of
-- the thread: LEARN_TOMBSTONES), else it gets 'UNKNOWN <checkpoint_id>' while
-- checked_through is '0': Redis cannot tell (it lost its data, its tombstones expired), so
-- the caller loads MongoDB's tombstones of the thread into Redis and sends again with a
-- checked-through time of at least 1 (plans/tombstones.py). Unless the partition's
-- complete thread registry (registry_key) has never seen the thread (never_stored): then
-- no tier holds a checkpoint or a tombstone of it (a new thread whose pending writes come
-- before its first put), so the write is taken, also while MongoDB is down.
local function deleted_refusal(checkpoints_key, gone_key, registry_key, named,
                               checked_through, thread_id)
  if named ~= '' and rcall('HEXISTS', checkpoints_key, named) == 0 then
    local at = rcall('HGET', gone_key, named)
    if at then
      if tonumber(at) > tonumber(checked_through) then
        return redis.error_reply('DELETED ' .. at)
      end
    elseif checked_through == '0' and rcall('HEXISTS', gone_key, '!') == 0
        and not never_stored(registry_key, thread_id) then
      -- the reply carries the checkpoint_id only (an error string ends at a NUL)
      local cut = string.find(named, '\0', 1, true) or 0
      return redis.error_reply('UNKNOWN ' .. string.sub(named, cut + 1))
    end
  end
  return nil
end
