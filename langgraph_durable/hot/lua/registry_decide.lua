--[[
  REGISTRY_DECIDE: finish a decision: set the registry's epoch to '<state> <nonce>' only
  if it is still 'pending <nonce>' (this claim's): the hash was neither lost nor claimed
  again since. (hot/registry_scripts.py: decide_op.)

  Input:
    KEYS[1]  registry_key     the partition's thread registry (field '\0epoch')

    ARGV[1]  nonce            the claim's
    ARGV[2]  state            'complete' or 'partial'

  Output:
    1 if set, else 0

  Errors: none of its own.
]]
local rcall = redis.call
local registry_key = KEYS[1]

if rcall('HGET', registry_key, '\0epoch') ~= 'pending ' .. ARGV[1] then return 0 end
rcall('HSET', registry_key, '\0epoch', ARGV[2] .. ' ' .. ARGV[1])
return 1
