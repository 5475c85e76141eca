--[[
  How a record moves between buckets, indexes and counters, written once: record-outcome.lua and
  finish-attempt.lua include it (`--- @include "record"`, redis/scripts.ts).
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

-- The names in a space-separated list, as a set.
local function lt_names(list)
  local set = {}
  for b in string.gmatch(list, '%S+') do set[b] = true end
  return set
end

-- Writes a learner's record and moves it from its old bucket to the new one: indexes at once, counter
-- deltas summed into runDelta/orgDelta for lt_apply. A learner counts once in a run; one moved to a new
-- run keeps its final count in the old run (history), so only the same run is decremented.
--
-- runFail is the failure index of run `runId` (sorted set learner -> time of the outcome; nil when the
-- caller declared none for this run), `fail` the set of failure buckets. It follows the run's counters:
-- a learner leaves it only while it stays in the run (a retry re-queued it, or it succeeded), and one
-- moved to a new run stays in its old run's index, as its final count stays in the old run's counters.
-- Readers keep only learners whose record still names the run and a failure bucket, so an entry left
-- behind in an old run's index costs a row slot, never a wrong row.
local function lt_write(outKey, idx, runFail, fail, runDelta, orgDelta, learner, oldBucket, oldRun, newJson, bucket, runId, now)
  if oldBucket ~= '' then
    orgDelta[oldBucket] = (orgDelta[oldBucket] or 0) - 1
    if idx[oldBucket] then redis.call('ZREM', idx[oldBucket], learner) end
    if oldRun == runId then
      runDelta[oldBucket] = (runDelta[oldBucket] or 0) - 1
      if runFail and fail[oldBucket] and not fail[bucket] then redis.call('ZREM', runFail, learner) end
    end
  end
  redis.call('HSET', outKey, learner, newJson)
  if idx[bucket] then redis.call('ZADD', idx[bucket], now, learner) end
  if runFail and fail[bucket] then redis.call('ZADD', runFail, now, learner) end
  runDelta[bucket] = (runDelta[bucket] or 0) + 1
  orgDelta[bucket] = (orgDelta[bucket] or 0) + 1
  if oldRun ~= runId then runDelta['total'] = (runDelta['total'] or 0) + 1 end
end

local function lt_apply(key, delta)
  for k, n in pairs(delta) do
    if n ~= 0 then redis.call('HINCRBY', key, k, n) end
  end
end
