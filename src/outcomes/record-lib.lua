--[[
  Shared by record-outcome.lua and finish-attempt.lua: prepended to each when it is loaded (store.ts),
  so the one way a record moves between buckets, indexes and counters is written once.
]]

-- A record decoded from its JSON, or nil (absent or unreadable).
local function lt_decode(text)
  if not text then return nil end
  local ok, decoded = pcall(cjson.decode, text)
  if ok and type(decoded) == 'table' then return decoded end
  return nil
end

-- Index key per indexed bucket: the buckets are named in `list` (space-separated) in the order of their
-- keys in KEYS from `first` on. Declared keys, so the script is right on Redis Cluster.
local function lt_index_keys(list, first)
  local idx, i = {}, first
  for b in string.gmatch(list, '%S+') do
    idx[b] = KEYS[i]
    i = i + 1
  end
  return idx
end

-- Writes a learner's record and moves it from its old bucket to the new one: indexes at once, counter
-- deltas summed into runDelta/orgDelta for lt_apply. A learner counts once in a run; one moved to a new
-- run keeps its final count in the old run (history), so only the same run is decremented.
local function lt_write(outKey, idx, runDelta, orgDelta, learner, oldBucket, oldRun, newJson, bucket, runId, now)
  if oldBucket ~= '' then
    orgDelta[oldBucket] = (orgDelta[oldBucket] or 0) - 1
    if idx[oldBucket] then redis.call('ZREM', idx[oldBucket], learner) end
    if oldRun == runId then runDelta[oldBucket] = (runDelta[oldBucket] or 0) - 1 end
  end
  redis.call('HSET', outKey, learner, newJson)
  if idx[bucket] then redis.call('ZADD', idx[bucket], now, learner) end
  runDelta[bucket] = (runDelta[bucket] or 0) + 1
  orgDelta[bucket] = (orgDelta[bucket] or 0) + 1
  if oldRun ~= runId then runDelta['total'] = (runDelta['total'] or 0) + 1 end
end

local function lt_apply(key, delta)
  for k, n in pairs(delta) do
    if n ~= 0 then redis.call('HINCRBY', key, k, n) end
  end
end
