--[[
  Writes outcome records of one organization and one run, with their indexes and counters, in one
  atomic step; one call takes a whole batch (counters summed and applied once).

  KEYS[1]  outcomes hash of the organization          ({org}:out)
  KEYS[2]  bucket counters of the run                  ({org}:run:<runId>)
  KEYS[3]  bucket counters of the organization         ({org}:counts)
  KEYS[4]  failed learners of the run                  ({org}:run:<runId>:fail)
  KEYS[5..] the index of each bucket named in ARGV[4], in that order ({org}:out:idx:<bucket>)
  ARGV[1]  run id of the new records
  ARGV[2]  time (ms), the score in the indexes
  ARGV[3]  space-separated failure buckets (members of KEYS[4])
  ARGV[4]  space-separated buckets that get an index
  ARGV[5]  mode: "set" always writes; "enqueue" only where there is no record or a final one updated
           before ARGV[6]; "enqueue-cancelled" also re-opens `cancelled`; "approve" only moves a record
           `awaiting-approval` in run ARGV[1] (keeping it, with the new bucket and time)
  ARGV[6]  force cutoff (ms): final records updated before it are re-opened; "0" re-opens none
  ARGV[7]  a canary run's size, or "": in an "enqueue" mode, the run's learners written beyond it in
           this organization (counted from the run's counters, here, in the same atomic step: two
           producers adding to one run at once never both take the last places) are written
           `awaiting-approval` instead of the bucket given (docs/canary.md)
  ARGV[8..] triples: learner id, new record (JSON with b = bucket, r = run id), new bucket

  `po` (the organization before the transfer) is kept whatever the mode; the new record's wins when it
  has one, and a waiting learner ("skip") takes it too.

  Returns: one string per learner: its old bucket ("" when it had no record), "skip:<old bucket>" when
  mode "enqueue" kept the old record, or "wait:<old bucket>" when the canary wrote it awaiting approval.
]]
--- @keys 4+
--- @include "record"
local runId, now = ARGV[1], ARGV[2]
local enqueue, forceBefore = ARGV[5] == 'enqueue' or ARGV[5] == 'enqueue-cancelled', tonumber(ARGV[6]) or 0
local reopenCancelled = ARGV[5] == 'enqueue-cancelled'
local approve = ARGV[5] == 'approve'
local idx = lt_index_keys(ARGV[4], 5)
local fail = lt_names(ARGV[3])

-- The places left in a canary run: its size less the run's learners of this organization not awaiting
-- approval (nil: not a canary run).
local left = nil
if enqueue and ARGV[7] ~= '' then
  local total = tonumber(redis.call('HGET', KEYS[2], 'total') or '0') or 0
  local waiting = tonumber(redis.call('HGET', KEYS[2], 'awaiting-approval') or '0') or 0
  left = tonumber(ARGV[7]) - (total - waiting)
end

local runDelta, orgDelta = {}, {}
local KEEP = {'a', 'h', 'x', 'au', 'c', 's', 'e', 'm', 'k', 'ai', 'pr', 'll', 'ak', 'f', 'hc', 'ah', 'po'}

-- A waiting learner's record takes the previous organization the new record names (see the header).
local function takePrevious(learner, oldRecord, newJson)
  if not string.find(newJson, '"po":', 1, true) then return end
  local po = cjson.decode(newJson)['po']
  if po == nil or oldRecord['po'] == po then return end
  oldRecord['po'] = po
  redis.call('HSET', KEYS[1], learner, cjson.encode(oldRecord))
end

local results = {}
for i = 8, #ARGV, 3 do
  local learner, newJson, bucket = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local old = redis.call('HGET', KEYS[1], learner)
  local oldRecord = lt_decode(old)
  local oldBucket, oldRun = '', ''
  if oldRecord then
    oldBucket = oldRecord['b'] or ''
    oldRun = oldRecord['r'] or ''
  end

  local write = true
  if approve then
    if oldRecord and oldBucket == 'awaiting-approval' and oldRun == runId then
      oldRecord['b'], oldRecord['t'] = bucket, tonumber(now)
      newJson = cjson.encode(oldRecord)
    else
      write = false
      results[#results + 1] = 'skip:' .. oldBucket
    end
  elseif enqueue and old then
    local final = oldBucket ~= 'queued' and oldBucket ~= 'retrying' and oldBucket ~= 'awaiting-approval'
      and oldBucket ~= ''
    -- A record updated after the cutoff is news the caller did not see (a reconcile's walk read the
    -- learner before a worker moved it): it stays as it is.
    local older = (oldRecord and (tonumber(oldRecord['t']) or 0) or 0) < forceBefore
    if final and (older or (reopenCancelled and oldBucket == 'cancelled')) then
      -- Re-opened on purpose: the learner's history stays with it.
      if oldRecord then
        local rec = cjson.decode(newJson)
        for _, field in ipairs(KEEP) do
          if oldRecord[field] ~= nil and rec[field] == nil then rec[field] = oldRecord[field] end
        end
        -- A compacted record left out an outcome code equal to its bucket: the code goes on with it.
        if oldRecord['f'] ~= nil and oldRecord['c'] == nil then rec['c'] = oldBucket end
        -- The new record starts at 0 attempts: the learner's count goes on from its old one.
        if oldRecord['a'] ~= nil then rec['a'] = oldRecord['a'] end
        newJson = cjson.encode(rec)
      end
    else
      write = false
      if oldRecord and not final then takePrevious(learner, oldRecord, newJson) end
      results[#results + 1] = 'skip:' .. oldBucket
    end
  end

  local past = false
  if write and left ~= nil then
    if left > 0 then
      left = left - 1
    else
      past, bucket = true, 'awaiting-approval'
      local rec = cjson.decode(newJson)
      rec['b'] = bucket
      newJson = cjson.encode(rec)
    end
  end

  if write then
    lt_write(KEYS[1], idx, KEYS[4], fail, runDelta, orgDelta, learner, oldBucket, oldRun, newJson, bucket, runId, now)
    results[#results + 1] = (past and 'wait:' or '') .. oldBucket
  end
end

lt_apply(KEYS[2], runDelta)
lt_apply(KEYS[3], orgDelta)
return results
