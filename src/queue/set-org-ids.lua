--[[
  Gives organization keys their numeric ids, refusing an id that another key would then share: two keys
  for one organization would each spend that organization's daily budget.

  KEYS[1]   hash: organization key -> numeric id
  ARGV[1]   'set' to write the ids, 'check' to only check them, 'learn' to write only ids of keys that
            have none yet (an id learned from the list never replaces one given or learned before)
  ARGV[2..] pairs: organization key, id (decimal)

  Returns   {} when no other key has a given id (with 'set', the ids are then written);
            {key, other key, id} for the first given id another key would share (nothing written).
]]
--- @keys 1
local current = redis.call('HGETALL', KEYS[1])
local after, order = {}, {}
for i = 1, #current, 2 do
  if after[current[i]] == nil then order[#order + 1] = current[i] end
  after[current[i]] = current[i + 1]
end
local learn = ARGV[1] == 'learn'
for i = 2, #ARGV, 2 do
  if after[ARGV[i]] == nil then order[#order + 1] = ARGV[i] end
  if not (learn and after[ARGV[i]] ~= nil) then after[ARGV[i]] = ARGV[i + 1] end
end
for i = 2, #ARGV, 2 do
  local org = ARGV[i]
  local id = after[org]
  for _, other in ipairs(order) do
    if other ~= org and after[other] == id then return {org, other, id} end
  end
end
if ARGV[1] == 'set' and #ARGV > 1 then
  redis.call('HSET', KEYS[1], unpack(ARGV, 2))
end
if learn then
  for i = 2, #ARGV, 2 do redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
return {}
