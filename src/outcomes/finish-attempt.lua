--[[
  The end of one transfer attempt in one atomic step: the response's audit entry, the record merged from
  its current state, the permit settled, the lease freed (decision 9). Idempotent for a spool replay:
  the audit entry is keyed by ARGV[12], the record keeps the merged attempt ids (`ai`).

  KEYS[1]  outcomes hash ({org}:out)          KEYS[2]  run counters ({org}:run:<runId>)
  KEYS[3]  org counters ({org}:counts)        KEYS[4]  audit stream ({org}:audit)
  KEYS[5]  audit dedupe hash ({org}:audit:ids) KEYS[6] lease hash ({org}:lease)
  KEYS[7]  token log    KEYS[8]  token inflight    KEYS[9]  org log    KEYS[10] org inflight
  KEYS[11] failed learners of the run ({org}:run:<runId>:fail)
  KEYS[12..] the index of each bucket named in ARGV[6], in that order

  ARGV[1]  learner id            ARGV[2]  run id of the job        ARGV[3]  time of the attempt (ms)
  ARGV[4]  attempt id (unique per call: a replay of the same attempt merges nothing twice)
  ARGV[5]  update (JSON, '' for none), fields as FinishArgs.update in store.ts
  ARGV[6]  space-separated indexed buckets (see KEYS[12..])
  ARGV[7]  permit: 'response' (stamp now) | 'abandon' (stamp its deadline) | 'release' (never sent:
           return the budget) | '' (no permit)
  ARGV[8]  permit id   ARGV[9] token key TTL (ms)   ARGV[10] org key TTL (ms)
  ARGV[11] lease holder whose lease this attempt frees ('' = none)
  ARGV[12] audit dedupe key ('' = no audit entry)   ARGV[13] transfer id ('' when unknown)
  ARGV[14] the response body, verbatim (tokens scrubbed)   ARGV[15] audit kind
  ARGV[16] limiter events channel   ARGV[17] release event (JSON)
  ARGV[18] space-separated success buckets   ARGV[19] why the body is kept unread ('' = it was read)
  ARGV[20] space-separated failure buckets (members of KEYS[11])
  ARGV[21] byte length of an unreadable body whose prefix ARGV[14] is ('' = the body is whole)
  ARGV[22] its SHA-256 (hex): a later entry with the same body keeps only `sameBodyAs`, not the prefix

  Merge rules: a success is never replaced by a failure, 'transferred' never by 'already-in-org', and
  'cancelled' only by a success. A success after attempts that lost their answer, with no known
  transfer, is a possible repeat (pr = 1). A record that ends final is compacted (includes/compact.lua).

  Returns {auditId ('' when none), bucket written, 1 if the attempt was already merged, pr}
]]
--- @keys 11+
--- @include "record"
--- @include "compact"
local learner, runId, now, attemptId = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
-- No update: the attempt ended before a call: free the permit and lease only.
local u = {}
if ARGV[5] ~= '' then u = cjson.decode(ARGV[5]) end
local idx = lt_index_keys(ARGV[6], 12)
local success = lt_names(ARGV[18])
local fail = lt_names(ARGV[20])

local old = lt_decode(redis.call('HGET', KEYS[1], learner))
local oldBucket, oldRun = '', ''
if old then
  oldBucket = old['b'] or ''
  oldRun = old['r'] or ''
end

local function contains(t, x)
  for _, v in ipairs(t) do
    if v == x then return true end
  end
  return false
end

-- Attempts merged before the record was compacted are kept as short hashes (`ah`).
local replay = old ~= nil and (contains(lt_list(old['ai']), attemptId) or contains(lt_list(old['ah']), lt_short(attemptId)))

-- A repeat of a learner never recorded transferred, after an attempt whose answer was lost: the
-- transfer may have been that attempt's. Its causes go to the audit entry (repeat-causes.ts).
local pr, causes = 0, {}
local function because(c)
  pr = 1
  if not contains(causes, c) then causes[#causes + 1] = c end
end
if u['b'] == 'already-in-org' and old and old['x'] == nil and old['b'] ~= 'transferred' then
  -- The lease may have been taken over by an earlier attempt that drew another answer (a 429, a 500):
  -- the dead holder's call is as unknown now as it was then (field `ll`, kept for that).
  if tonumber(u['lost']) == 1 or tonumber(old['ll']) == 1 then because('lost-lease') end
  for _, h in ipairs(lt_list(old['h'])) do
    if type(h) == 'table' and h[2] == 'network-error' then because('no-answer') end
    if type(h) == 'table' and h[2] == 'bad-response' then because('unreadable-answer') end
  end
  -- A compacted record keeps what its history said of lost answers (`hc`).
  local hc = old['hc'] or ''
  if string.find(hc, 'n', 1, true) then because('no-answer') end
  if string.find(hc, 'u', 1, true) then because('unreadable-answer') end
elseif u['b'] == 'already-in-org' and not old and tonumber(u['lost']) == 1 then
  because('lost-lease')
end

-- A possible repeat answered by the 400 has no body, yet the stream must show it: an entry of kind
-- 'possible-repeat', keyed by the attempt.
local auditKey, auditKind, auditRaw, auditTransfer = ARGV[12], ARGV[15], ARGV[14], ARGV[13]
if auditKey == '' and pr == 1 then
  auditKey, auditKind, auditRaw, auditTransfer = 'r:' .. attemptId, 'possible-repeat', '', ''
end

-- 1. The response, verbatim, once: a replay of a merged attempt wrote it already.
local auditId = ''
local bodyKeyNew = nil
if auditKey ~= '' and replay then
  auditId = redis.call('HGET', KEYS[5], auditKey) or ''
elseif auditKey ~= '' then
  local known = redis.call('HGET', KEYS[5], auditKey)
  local bodyKey, sameBody = nil, nil
  if ARGV[22] and ARGV[22] ~= '' then
    bodyKey = 'b:' .. learner .. ':' .. ARGV[22]
    sameBody = redis.call('HGET', KEYS[5], bodyKey)
    if sameBody then auditRaw = '' end
  end
  -- A compacted record's dedupe keys are gone. A record compacted as 'transferred' got its transfer id
  -- from that transfer's own answer, written in the same step: that entry is in its story already. (An
  -- id taken from a repeat's answer is not: the transfer's own answer, replayed late, is written.)
  local inStory = not known and old ~= nil and old['f'] ~= nil and old['b'] == 'transferred'
    and old['x'] ~= nil and auditKey == 't:' .. old['x']
  if known then
    auditId = known
  elseif inStory then
    auditId = ''
  else
    local fields = {'learnerId', learner, 'runId', runId, 'transferId', auditTransfer, 'kind', auditKind,
      'at', ARGV[3], 'raw', auditRaw}
    if ARGV[19] ~= '' then
      fields[#fields + 1] = 'reason'
      fields[#fields + 1] = ARGV[19]
    end
    if pr == 1 then
      fields[#fields + 1] = 'possibleRepeat'
      fields[#fields + 1] = '1'
      fields[#fields + 1] = 'repeatCause'
      fields[#fields + 1] = table.concat(causes, ' ')
    end
    if bodyKey then
      fields[#fields + 1] = 'bodyBytes'
      fields[#fields + 1] = ARGV[21]
      fields[#fields + 1] = 'bodySha256'
      fields[#fields + 1] = ARGV[22]
      if sameBody then
        fields[#fields + 1] = 'sameBodyAs'
        fields[#fields + 1] = sameBody
      end
    end
    auditId = redis.call('XADD', KEYS[4], '*', unpack(fields))
    redis.call('HSET', KEYS[5], auditKey, auditId)
    if bodyKey and not sameBody then
      redis.call('HSET', KEYS[5], bodyKey, auditId)
      bodyKeyNew = bodyKey
    end
  end
end

-- 2. The record, merged into its current state.
local bucket = oldBucket
if not replay and ARGV[5] ~= '' then
  local rec = old or {}
  bucket = u['b']
  local kept = false
  if success[oldBucket] and not success[bucket] then bucket, kept = oldBucket, true end
  if oldBucket == 'transferred' and bucket == 'already-in-org' then bucket, kept = 'transferred', true end
  -- A cancelled learner had no call in flight: an outcome now is a replay or a worker-error. Only a
  -- success (the transfer did happen) replaces it; anything else joins the history only.
  if oldBucket == 'cancelled' and not success[bucket] then bucket, kept = oldBucket, true end
  -- Kept: the record stays in its run (its counters net to nothing below).
  local writeRun = runId
  if kept and oldRun ~= '' then writeRun = oldRun end
  rec['b'] = bucket
  rec['r'] = writeRun
  rec['q'] = rec['q'] or now
  -- A late attempt that does not change the outcome joins the history only: the record keeps the
  -- code, status, message and time of the outcome it shows.
  if not kept then
    rec['t'] = now
    rec['c'], rec['s'], rec['e'], rec['m'] = u['c'], u['s'], u['e'], u['m']
  end
  if u['k'] then rec['k'] = u['k'] end
  rec['a'] = (tonumber(rec['a']) or 0) + (tonumber(u['n']) or 0)
  if u['x'] and (rec['x'] == nil or u['b'] == 'transferred') and not (oldBucket == 'transferred' and u['b'] ~= 'transferred') then
    rec['x'] = u['x']
  end
  if pr == 1 then rec['pr'] = 1 end
  if tonumber(u['lost']) == 1 then rec['ll'] = 1 end
  -- The transfer's own answer is on record now: nothing is unknown any more.
  if u['b'] == 'transferred' then rec['pr'], rec['ll'] = nil, nil end
  if auditId ~= '' and not contains(lt_list(rec['au']), auditId) then rec['au'] = lt_push(lt_list(rec['au']), auditId, 10) end
  -- Whole ms: a float's 16 digits cost every history entry.
  rec['h'] = lt_push(lt_list(rec['h']), {now, u['c'], tonumber(u['s']) or 0, math.floor((tonumber(u['d']) or 0) + 0.5)}, 10)
  rec['ai'] = lt_push(lt_list(rec['ai']), attemptId, 10)
  -- This learner's dedupe keys in KEYS[5], dropped when the record is compacted.
  if auditKey ~= '' and not contains(lt_list(rec['ak']), auditKey) then rec['ak'] = lt_push(lt_list(rec['ak']), auditKey, 10) end
  if bodyKeyNew then rec['ak'] = lt_push(lt_list(rec['ak']), bodyKeyNew, 10) end
  if bucket ~= 'queued' and bucket ~= 'retrying' then lt_compact(rec, learner, writeRun, bucket, ARGV[3], KEYS[4], KEYS[5]) end
  -- KEYS[11] is the job's run's failure index: a record kept in another run leaves it alone.
  local runFail = nil
  if writeRun == runId then runFail = KEYS[11] end
  local runDelta, orgDelta = {}, {}
  lt_write(KEYS[1], idx, runFail, fail, runDelta, orgDelta, learner, oldBucket, oldRun, cjson.encode(rec), bucket, writeRun, now)
  lt_apply(KEYS[2], runDelta)
  lt_apply(KEYS[3], orgDelta)
end

-- 3. The permit (modes: limiter/settle.lua); a replay settled it already.
local mode, permitId = ARGV[7], ARGV[8]
if mode ~= '' and permitId ~= '' and not replay then
  local time = redis.call('TIME')
  local tnow = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  if mode == 'release' then
    local removed = redis.call('ZREM', KEYS[8], permitId) + redis.call('ZREM', KEYS[10], permitId)
    if removed > 0 then redis.call('PUBLISH', ARGV[16], ARGV[17]) end
  else
    local function settle(logKey, inflightKey, keyTtl)
      local deadline = redis.call('ZSCORE', inflightKey, permitId)
      local score = tnow
      if mode == 'abandon' then
        if not deadline then return end
        score = math.max(tnow, tonumber(deadline))
      end
      if deadline then redis.call('ZREM', inflightKey, permitId) end
      redis.call('ZADD', logKey, 'GT', score, permitId)
      if redis.call('PTTL', logKey) < keyTtl then redis.call('PEXPIRE', logKey, keyTtl) end
    end
    settle(KEYS[7], KEYS[8], tonumber(ARGV[9]))
    settle(KEYS[9], KEYS[10], tonumber(ARGV[10]))
  end
end

-- 4. The lease, if this attempt still holds it.
if ARGV[11] ~= '' then
  local lease = redis.call('HGET', KEYS[6], learner)
  if lease and string.sub(lease, 1, #ARGV[11] + 1) == ARGV[11] .. ' ' then
    redis.call('HDEL', KEYS[6], learner)
  end
end

return {auditId, bucket, replay and 1 or 0, pr}
