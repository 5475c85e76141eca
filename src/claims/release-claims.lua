--[[
  Releases learners' claims, each only while the organization named still holds it (a learner
  cancelled there: src/ops/actions/cancel.ts); a claim another organization took stays its own.

  KEYS[1]  claims hash (learner id -> org key)
  ARGV[1..] pairs: learner id, org key

  Returns the number of claims released.
]]
--- @keys 1
local released = 0
for i = 1, #ARGV, 2 do
  local learner, org = ARGV[i], ARGV[i + 1]
  if redis.call('HGET', KEYS[1], learner) == org then
    redis.call('HDEL', KEYS[1], learner)
    released = released + 1
  end
end
return released
