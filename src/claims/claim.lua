--[[
  Claims learners for organizations: under one prefix a learner belongs to at most one organization's
  work (queued, in progress or done). First claim wins; the same organization claiming again is a no-op.

  KEYS[1]  claims hash (learner id -> org key)
  ARGV[1]  'claim' | 'move' (move: a learner held by another organization is given to this one; the
           caller has checked that no call for it is in flight there and writes the move in the audit)
  ARGV[2..] pairs: learner id, org key

  Returns one string per pair: 'ok' (claimed now or already this org's), 'held:<org>' (another
  organization holds it; nothing written), 'moved:<org>' (taken from that organization).
]]
--- @keys 1
local move = ARGV[1] == 'move'
local out = {}
for i = 2, #ARGV, 2 do
  local learner, org = ARGV[i], ARGV[i + 1]
  -- One command for the common case, a learner nobody holds yet.
  local holder = nil
  if redis.call('HSETNX', KEYS[1], learner, org) == 0 then holder = redis.call('HGET', KEYS[1], learner) end
  if not holder then
    out[#out + 1] = 'ok'
  elseif holder == org then
    out[#out + 1] = 'ok'
  elseif move then
    redis.call('HSET', KEYS[1], learner, org)
    out[#out + 1] = 'moved:' .. holder
  else
    out[#out + 1] = 'held:' .. holder
  end
end
return out
