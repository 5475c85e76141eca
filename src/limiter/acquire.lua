--[[
  Acquire one transfer permit for ONE organization from a pool of its tokens: an exact sliding-window
  log per token and per organization, all or nothing across both scopes.

  Input:
    KEYS[1]            org log         sorted set: permit id -> time the request is counted until (ms)
    KEYS[2]            org inflight    sorted set: permit id -> in-flight deadline (ms)
    KEYS[3]            org block       string (reason), PX expiry for a 429, no expiry for "until unblock"
    KEYS[4]            lease hash      learner id -> "holder deadline contestedAt" (see Lease below)
    KEYS[5]            job lock        BullMQ's lock of the job asking (string: its token)
    KEYS[3i+3..3i+5]   token i's log, inflight and block (i = 1..n, same meanings), n >= 0

    ARGV[1]  token limit: most permits per token window
    ARGV[2]  token window (ms)
    ARGV[3]  org limit: most permits per org window
    ARGV[4]  org window (ms)
    ARGV[5]  in-flight TTL (ms): the request timeout plus a margin for a server that counts late
    ARGV[6]  random suffix that makes the permit id unique
    ARGV[7]  learner id the permit is for ('' = no lease: a bare budget permit, as in benchmarks)
    ARGV[8]  lease holder (the job's lock token, or any id unique to this attempt)
    ARGV[9]  the job's lock token, checked against KEYS[5] ('' = do not check)
    ARGV[10] lease grace (ms): how long an expired lease of another holder is contested before it is
             taken over (its holder may be alive with a response it could not record yet)

  Output:
    {1, permitId, tokenIndex (1-based), now, tookOver}       granted (tookOver 1: the learner's lease
                                                             was taken over from a holder that died)
    {0, waitMs, scope, allBlockedIndefinitely (0|1), now}    refused, nothing written but housekeeping
      scope: 'token' | 'org' | 'blocked-token' | 'blocked-org' | 'no-token' | 'lease' | 'lost-lock'
      waitMs: no permit can exist before now + waitMs (unless a permit is released or a block lifted
      early, both announced on the events channel). When every token (or the org) is blocked until an
      unblock, waitMs is a sentinel (one window) and allBlockedIndefinitely is 1.

  Lease. At most one transfer call in flight per learner, whatever happens to job locks: a permit for a
  learner is granted only with its lease, written here in the same step. A job whose BullMQ lock is no
  longer its own ('lost-lock': the stalled check gave the job to another worker) gets nothing. A lease
  held by another holder refuses ('lease', wait = until its deadline). A lease past its deadline is first
  marked contested and refused for the grace; only a lease still expired and contested after the grace
  is taken over. Its holder, if alive, records its response within the grace (that write frees the
  lease), so a takeover means the holder died: its response, if any, is in its spool or lost with it.
  The lease is freed by finish-attempt.lua together with the record of the call.

  Clock: Redis TIME only (ms), one clock for every process; the host must slew, not step, its clock.

  Counting. A scope's count at `now` = log entries with score >= now - window (inclusive: see below)
  + every in-flight entry. An in-flight entry whose deadline has passed (holder died or hung) is moved
  into the log with score = its deadline, the latest moment the server may have counted it; log entries
  older than the window are trimmed. So budget is never leaked for ever, and never freed early.

  Why no window of the server ever holds more than N (proof sketch; keep it true):
    Request i is acquired at a_i, sent at send_i > a_i, counted by the server at some s_i in
    [send_i, response_i], and settled after its response: its log score is Redis TIME at settle, so
    score_i >= response_i >= s_i. A request that never got an answer keeps its in-flight entry until its
    deadline d_i (abandon/expiry), which by the choice of TTL is >= s_i; release is only for a request
    that provably never reached the server (no s_i at all).
    Take any N+1 requests that the server counts inside one window of length W: rolling or fixed, any
    alignment, open or closed at either end (a calendar day is a fixed window). Then s_i >= s_j - W for
    any two of them. Let j be the one acquired last (scripts run one at a time, so acquires are totally
    ordered). At a_j every other i of them had been acquired, and was either in flight (counted), or in
    the log with score_i >= s_i >= s_j - W >= a_j - W (counted, the window being inclusive), or released
    (then the server never counted it: not one of the N+1). So j saw >= N counted and was refused:
    contradiction. Scores are whole ms (floor of TIME): floor(score_i) >= floor(a_j) - W still holds,
    which is why the log counts score >= now - W and an entry frees at score + W + 1, not + W.
    The same argument holds per token and per organization, and a permit is written to both or neither.

  Wait (exact): a scope with count C >= max frees a slot when k = C - max + 1 entries have left it.
  If the log holds >= k entries, that is when the k-th oldest ages out: score_k + W + 1 - now. Otherwise
  in-flight entries must leave too; one leaves no earlier than its settle (>= now) + W + 1, so W + 1 is
  the exact lower bound, and the caller simply asks again then. The refusal's wait =
  max(org wait, min over tokens not blocked for good of max(token wait, token block ttl)).
]]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local tokenMax = tonumber(ARGV[1])
local tokenWindow = tonumber(ARGV[2])
local orgMax = tonumber(ARGV[3])
local orgWindow = tonumber(ARGV[4])
local inflightTtl = tonumber(ARGV[5])
local tokenCount = (#KEYS - 5) / 3
local learner, holder, lockToken, leaseGrace = ARGV[7], ARGV[8], ARGV[9], tonumber(ARGV[10]) or 0

-- Keys vanish when idle: an entry matters for at most TTL + window after the write that made it.
local tokenKeyTtl = tokenWindow + inflightTtl + 1000
local orgKeyTtl = orgWindow + inflightTtl + 1000

-- Moves expired in-flight entries into the log at their deadline, trims the log to the window,
-- and returns the numbers of log and in-flight entries.
local function refresh(logKey, inflightKey, window, keyTtl)
  local expired = redis.call('ZRANGE', inflightKey, '-inf', now, 'BYSCORE', 'WITHSCORES')
  if #expired > 0 then
    for i = 1, #expired, 2 do
      redis.call('ZADD', logKey, 'GT', expired[i + 1], expired[i])
    end
    redis.call('ZREMRANGEBYSCORE', inflightKey, '-inf', now)
    redis.call('PEXPIRE', logKey, keyTtl)
  end
  redis.call('ZREMRANGEBYSCORE', logKey, '-inf', string.format('(%d', now - window))
  return redis.call('ZCARD', logKey), redis.call('ZCARD', inflightKey)
end

-- Milliseconds until the scope can hold one more permit (0: it has room now). See "Wait" above.
local function windowWait(logKey, logCount, inflightCount, max, window)
  local k = logCount + inflightCount - max + 1
  if k <= 0 then
    return 0
  end
  if k <= logCount then
    local entry = redis.call('ZRANGE', logKey, k - 1, k - 1, 'WITHSCORES')
    return tonumber(entry[2]) + window + 1 - now
  end
  return window + 1
end

if tokenCount < 1 then
  return {0, tokenWindow, 'no-token', 1, now}
end

local tookOver = 0
if learner ~= '' then
  if lockToken ~= '' and redis.call('GET', KEYS[5]) ~= lockToken then
    return {0, 0, 'lost-lock', 0, now}
  end
  local lease = redis.call('HGET', KEYS[4], learner)
  if lease then
    local owner, deadline, contested = string.match(lease, '^(%S+) (%d+) (%d+)$')
    deadline, contested = tonumber(deadline) or 0, tonumber(contested) or 0
    if owner ~= holder then
      if now < deadline then
        return {0, deadline - now, 'lease', 0, now}
      end
      if contested == 0 then
        redis.call('HSET', KEYS[4], learner, string.format('%s %d %d', owner, deadline, now))
        return {0, math.max(1, leaseGrace), 'lease', 0, now}
      end
      if now < contested + leaseGrace then
        return {0, contested + leaseGrace - now, 'lease', 0, now}
      end
      tookOver = 1
    end
  end
end

-- PTTL: -2 no block, -1 blocked until unblock, > 0 blocked for that many ms.
local orgBlock = redis.call('PTTL', KEYS[3])
if orgBlock == -1 then
  return {0, orgWindow, 'blocked-org', 1, now}
end
local orgLog, orgInflight = refresh(KEYS[1], KEYS[2], orgWindow, orgKeyTtl)
local orgWait = windowWait(KEYS[1], orgLog, orgInflight, orgMax, orgWindow)

-- The usable token with the most room left, so load spreads over the pool (first one on a tie).
local tokens = {}
local best, bestRemaining = 0, 0
local anyUsable = false
for i = 1, tokenCount do
  local base = 3 * i + 2
  local blockTtl = redis.call('PTTL', KEYS[base + 3])
  local logCount, inflightCount = refresh(KEYS[base + 1], KEYS[base + 2], tokenWindow, tokenKeyTtl)
  tokens[i] = {logCount, inflightCount, blockTtl}
  if blockTtl ~= -1 then
    anyUsable = true
  end
  local remaining = tokenMax - logCount - inflightCount
  if blockTtl == -2 and remaining > bestRemaining then
    best, bestRemaining = i, remaining
  end
end

if orgBlock == -2 and orgWait == 0 and best > 0 then
  local permitId = string.format('%d-%s', now, ARGV[6])
  local deadline = now + inflightTtl
  local inflightKey = KEYS[3 * best + 4]
  redis.call('ZADD', inflightKey, deadline, permitId)
  redis.call('PEXPIRE', inflightKey, tokenKeyTtl)
  redis.call('ZADD', KEYS[2], deadline, permitId)
  redis.call('PEXPIRE', KEYS[2], orgKeyTtl)
  if learner ~= '' then
    redis.call('HSET', KEYS[4], learner, string.format('%s %d 0', holder, deadline))
  end
  return {1, permitId, best, now, tookOver}
end

if not anyUsable then
  return {0, tokenWindow, 'blocked-token', 1, now}
end

local tokenWait, tokenScope = -1, 'token'
for i = 1, tokenCount do
  local t = tokens[i]
  if t[3] ~= -1 then
    local wait = windowWait(KEYS[3 * i + 3], t[1], t[2], tokenMax, tokenWindow)
    local scope = 'token'
    if t[3] >= 0 and t[3] >= wait then
      wait, scope = t[3], 'blocked-token'
    end
    if tokenWait < 0 or wait < tokenWait then
      tokenWait, tokenScope = wait, scope
    end
  end
end

local orgScope = 'org'
if orgBlock >= 0 and orgBlock >= orgWait then
  orgWait, orgScope = orgBlock, 'blocked-org'
end
if orgWait > 0 and orgWait >= tokenWait then
  return {0, math.max(1, orgWait), orgScope, 0, now}
end
return {0, math.max(1, tokenWait), tokenScope, 0, now}
