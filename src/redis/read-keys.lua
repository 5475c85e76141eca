#!lua flags=no-writes
--[[
  Reads several keys of one slot in one call: one call per organization for batch.ts, not one
  command per key.

  Input:
    KEYS[1]     a key
    KEYS[2..]   more keys, all in the slot of KEYS[1] (one organization's {hash tag})
    ARGV[i]     how to read KEYS[i]: 'hgetall', 'llen' or 'zcard'

  Output: one entry per key, in order: HGETALL's flat list of fields and values (empty for no key), or
  the length (0 for no key).
]]
--- @keys 1+
local out = {}
for i = 1, #KEYS do
  local how = ARGV[i]
  if how ~= 'hgetall' and how ~= 'llen' and how ~= 'zcard' then
    return redis.error_reply('read-keys: no read ' .. tostring(how) .. ' for key ' .. i)
  end
  out[i] = redis.call(how, KEYS[i])
end
return out
