--[[
  Change an organization's live policy (limits set / reset, pause, resume) in one atomic step, and
  announce it on the limiter events channel, so that the whole fleet follows from its next acquire.

  Input:
    KEYS[1]  policy hash (keys.policy(org))
    ARGV[1]  the change (JSON):
               set:    {field: value, ...}    fields written
               setnx:  {field: value, ...}    fields written only when absent (a pause keeps its first
                                              author and time)
               del:    [field, ...]           fields removed
               delPrefix: 'tok:' or ['tok:', 'learned:', ...]
                                              every field starting with it (one of them) is removed
                                              first (reset)
               share:  P or null              reserve given as a share (percent) of the org limit
                                              in effect after the change: reserve = ceil(max * P / 100)
               fallbackOrg: "max/windowMs"    the org limit when the hash has none (this process's LIMIT_*)
             A change of `org` without a reserve re-resolves a reserve that was given as a share.
    ARGV[2]  events channel   ARGV[3]  event message (small JSON, no secret)

  Output: {before (flat HGETALL), after (flat HGETALL)}
]]
--- @keys 1
local key = KEYS[1]
local change = cjson.decode(ARGV[1])
local before = redis.call('HGETALL', key)

local prefixes = change.delPrefix
if type(prefixes) == 'string' then
  prefixes = {prefixes}
end
if type(prefixes) == 'table' then
  for _, p in ipairs(prefixes) do
    if type(p) == 'string' and p ~= '' then
      for i = 1, #before, 2 do
        if string.sub(before[i], 1, #p) == p then
          redis.call('HDEL', key, before[i])
        end
      end
    end
  end
end
if type(change.del) == 'table' then
  for _, field in ipairs(change.del) do
    redis.call('HDEL', key, field)
  end
end
if type(change.set) == 'table' then
  for field, value in pairs(change.set) do
    redis.call('HSET', key, field, value)
  end
end
if type(change.setnx) == 'table' then
  for field, value in pairs(change.setnx) do
    redis.call('HSETNX', key, field, value)
  end
end

local share = tonumber(change.share)
local setOrg = type(change.set) == 'table' and change.set.org ~= nil
local setReserve = type(change.set) == 'table' and change.set.reserve ~= nil
if share == nil and setOrg and not setReserve then
  share = tonumber(redis.call('HGET', key, 'reserveShare'))
end
if share ~= nil then
  local orgRate = redis.call('HGET', key, 'org') or change.fallbackOrg or ''
  local max = tonumber(string.match(orgRate, '^(%d+)/')) or 0
  -- math.max: a share of 0 is ceil(-1e-9), which Lua writes as "-0".
  local reserve = math.max(0, math.ceil(max * share / 100 - 1e-9))
  redis.call('HSET', key, 'reserve', reserve, 'reserveShare', tostring(share))
end

redis.call('PUBLISH', ARGV[2], ARGV[3])
return {before, redis.call('HGETALL', key)}
