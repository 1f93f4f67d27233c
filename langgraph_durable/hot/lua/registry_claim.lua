--[[
  REGISTRY_CLAIM: start deciding a thread registry that has no epoch, or only a pending
  one (a decision that never finished, or another saver's still under way: taking it over
  defeats that one, never the answer), or any with force = '1' (a rebuild): mark it
  'pending <nonce>'. (hot/registry_scripts.py: claim_op, ClaimReply.)

  Input:
    KEYS[1]  registry_key     the partition's thread registry (field '\0epoch')
    KEYS[2]  outbox_key       the partition's outbox stream

    ARGV[1]  nonce            this claim's
    ARGV[2]  force            '1': claim whatever the epoch

  Output:
    {'', length of the outbox stream} when claimed; {the epoch, -1} when decided before

  Errors: none of its own.
]]
local rcall = redis.call
local registry_key, outbox_key = KEYS[1], KEYS[2]

local e = rcall('HGET', registry_key, '\0epoch')
if e and string.sub(e, 1, 8) ~= 'pending ' and ARGV[2] ~= '1' then return {e, -1} end
rcall('HSET', registry_key, '\0epoch', 'pending ' .. ARGV[1])
return {'', rcall('XLEN', outbox_key)}
