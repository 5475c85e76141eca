--[[
  Writes outcome records of one organization and one run, and keeps what depends on them consistent in
  the same atomic step: the per-bucket indexes of the organization, the run's bucket counters and the
  organization's bucket counters. One call takes a whole batch (the producer's 1000 learners), so the
  per-learner cost is two hash commands; counters are summed here and applied once.

  KEYS[1]  outcomes hash of the organization          ({org}:out)
  KEYS[2]  bucket counters of the run                  ({org}:run:<runId>)
  KEYS[3]  bucket counters of the organization         ({org}:counts)
  ARGV[1]  run id of the new records
  ARGV[2]  time (ms), the score in the indexes
  ARGV[3]  index key prefix ({org}:out:idx:) - same hash slot as KEYS[1]
  ARGV[4]  space-separated buckets that get an index
  ARGV[5]  mode: "set" always writes; "enqueue" writes only where there is no record or where the old
           record is final and was last updated before ARGV[6] (re-opened on purpose: it keeps the
           learner's history)
  ARGV[6]  force cutoff (ms): final records updated before it are re-opened; "0" re-opens none
  ARGV[7..] triples: learner id, new record (JSON with b = bucket, r = run id), new bucket

  Returns: one string per learner: its old bucket ("" when it had no record), or "skip:<old bucket>" when
  mode "enqueue" kept the old record.
]]
local runId, now, idxPrefix = ARGV[1], ARGV[2], ARGV[3]
local enqueue, forceBefore = ARGV[5] == 'enqueue', tonumber(ARGV[6]) or 0
local indexed = {}
for b in string.gmatch(ARGV[4], '%S+') do indexed[b] = true end

local runDelta, orgDelta = {}, {}
local function add(t, k, n) t[k] = (t[k] or 0) + n end
local KEEP = {'a', 'h', 'x', 'au', 'c', 's', 'e', 'm', 'k'}

local results = {}
for i = 7, #ARGV, 3 do
  local learner, newJson, bucket = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local old = redis.call('HGET', KEYS[1], learner)
  local oldBucket, oldRun, oldRecord = '', '', nil
  if old then
    local ok, decoded = pcall(cjson.decode, old)
    if ok and type(decoded) == 'table' then
      oldRecord = decoded
      oldBucket = decoded['b'] or ''
      oldRun = decoded['r'] or ''
    end
  end

  local write = true
  if enqueue and old then
    local final = oldBucket ~= 'queued' and oldBucket ~= 'retrying' and oldBucket ~= ''
    -- A record updated after the cutoff is news the caller did not see (a reconcile's walk read the
    -- learner before a worker moved it): it stays as it is.
    if final and (oldRecord and (tonumber(oldRecord['t']) or 0) or 0) < forceBefore then
      -- Re-opened on purpose: the learner's history (attempts, last transfer, audit ids) stays with it.
      if oldRecord then
        local rec = cjson.decode(newJson)
        for _, field in ipairs(KEEP) do
          if oldRecord[field] ~= nil and rec[field] == nil then rec[field] = oldRecord[field] end
        end
        -- The new record starts at 0 attempts: the learner's count goes on from its old one.
        if oldRecord['a'] ~= nil then rec['a'] = oldRecord['a'] end
        newJson = cjson.encode(rec)
      end
    else
      write = false
      results[#results + 1] = 'skip:' .. oldBucket
    end
  end

  if write then
    if oldBucket ~= '' then
      add(orgDelta, oldBucket, -1)
      if indexed[oldBucket] then redis.call('ZREM', idxPrefix .. oldBucket, learner) end
      -- A learner counts once in a run. One moved to a new run keeps its final count in the old run
      -- (history), so only the same run is decremented.
      if oldRun == runId then add(runDelta, oldBucket, -1) end
    end
    redis.call('HSET', KEYS[1], learner, newJson)
    if indexed[bucket] then redis.call('ZADD', idxPrefix .. bucket, now, learner) end
    add(runDelta, bucket, 1)
    add(orgDelta, bucket, 1)
    if oldRun ~= runId then add(runDelta, 'total', 1) end
    results[#results + 1] = oldBucket
  end
end

for k, n in pairs(runDelta) do if n ~= 0 then redis.call('HINCRBY', KEYS[2], k, n) end end
for k, n in pairs(orgDelta) do if n ~= 0 then redis.call('HINCRBY', KEYS[3], k, n) end end
return results
