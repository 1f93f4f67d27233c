--- @include "now_ms"

-- generation_entry(meta_key, gone_key, outbox_key, thread_id, payload): mark this
-- generation of the thread (meta 'born', ms, set by its first write) and append the
-- outbox entry {t = thread_id, p = payload} to outbox_key, stamped no earlier than 'born'.
-- The first write after a delete_thread takes 'born' = the Redis clock, or one millisecond
-- past the delete's tombstone '*' (gone_key; nil: not looked up) when the clock has not
-- passed it (a put in the delete's millisecond), so every entry of the new generation is
-- stamped after the delete and every entry stamped at or before it was added before it:
-- the fence takes those back (plans/fence.py) and the delete's MongoDB deletes take
-- (documents.stored_before), never the new run's. Returns the entry id.
local function generation_entry(meta_key, gone_key, outbox_key, thread_id, payload)
  local now = now_ms()
  local born = tonumber(rcall('HGET', meta_key, 'born') or '')
  if not born then
    born = now
    local tomb = gone_key and tonumber(rcall('HGET', gone_key, '*') or '')
    if tomb and tomb >= born then born = tomb + 1 end
    rcall('HSET', meta_key, 'born', born)
  end
  if born > now then  -- this millisecond is the delete's: stamp the entry after it
    local id = redis.pcall('XADD', outbox_key, born .. '-*', 't', thread_id, 'p', payload)
    if type(id) ~= 'table' or not id.err then return id end
    if string.find(id.err, 'Invalid stream ID', 1, true) then
      -- a Redis before 7.0 takes no '<ms>-*' id: wait for its clock to reach born (under a
      -- millisecond: born is at most one past it there, as no entry is stamped ahead)
      for _ = 1, 100000 do
        if now_ms() >= born then break end
      end
    end  -- else the stream's last entry is stamped later already: '*' is later still
  end
  return rcall('XADD', outbox_key, '*', 't', thread_id, 'p', payload)
end
