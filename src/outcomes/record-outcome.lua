--[[
  Writes one learner's outcome record and keeps the bookkeeping that depends on it consistent, in one
  atomic step: the per-bucket index of the organization and the per-run bucket counters.

  KEYS[1]  outcomes hash of the organization        ({org}:out)
  KEYS[2]  run counters hash of the record's run     ({org}:run:<runId>)
  KEYS[3]  bucket counters of the organization       ({org}:counts)
  ARGV[1]  learner id
  ARGV[2]  new record (JSON with fields b = bucket, r = run id)
  ARGV[3]  new bucket
  ARGV[4]  new run id
  ARGV[5]  time (ms) for the index score
  ARGV[6]  index key prefix ({org}:out:idx:) - same hash slot as KEYS[1]
  ARGV[7]  run counters key prefix ({org}:run:) - same hash slot as KEYS[1]
  ARGV[8]  space-separated list of buckets that get an index
  ARGV[9]  mode: "set" always writes; "enqueue" writes only when there is no record or, with
           ARGV[10] = "1" (force), when the old record is final
  ARGV[10] force ("1" or "0")

  Returns: the old bucket ("" when there was none), or "skip:<old bucket>" when mode "enqueue" kept the
  old record.
]]
local learner = ARGV[1]
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
local newJson = ARGV[2]

if ARGV[9] == 'enqueue' and old then
  local final = oldBucket ~= 'queued' and oldBucket ~= 'retrying' and oldBucket ~= ''
  if not (final and ARGV[10] == '1') then
    return 'skip:' .. oldBucket
  end
  -- Re-opened on purpose: keep the learner's history (attempts, last transfer, audit ids) with it.
  if oldRecord then
    local rec = cjson.decode(newJson)
    for _, field in ipairs({'a', 'h', 'x', 'au', 'c', 's', 'e', 'm', 'k'}) do
      if oldRecord[field] ~= nil and rec[field] == nil then rec[field] = oldRecord[field] end
    end
    if oldRecord['a'] ~= nil then rec['a'] = oldRecord['a'] end
    newJson = cjson.encode(rec)
  end
end

local indexed = {}
for b in string.gmatch(ARGV[8], '%S+') do indexed[b] = true end

if oldBucket ~= '' then
  redis.call('HINCRBY', KEYS[3], oldBucket, -1)
  if indexed[oldBucket] then redis.call('ZREM', ARGV[6] .. oldBucket, learner) end
  if oldRun ~= '' then
    -- A learner counts once in a run: leave its old bucket there. A learner moved to a new run keeps its
    -- final count in the old run (history), so only the same run is decremented.
    if oldRun == ARGV[4] then redis.call('HINCRBY', KEYS[2], oldBucket, -1) end
  end
end

redis.call('HSET', KEYS[1], learner, newJson)
if indexed[ARGV[3]] then redis.call('ZADD', ARGV[6] .. ARGV[3], ARGV[5], learner) end
redis.call('HINCRBY', KEYS[2], ARGV[3], 1)
redis.call('HINCRBY', KEYS[3], ARGV[3], 1)
if oldRun ~= ARGV[4] then redis.call('HINCRBY', KEYS[2], 'total', 1) end
return oldBucket
