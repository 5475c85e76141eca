--[[
  Acquire one transfer permit for ONE organization from a pool of its tokens: an exact sliding-window
  log per token and per organization, all or nothing across both scopes, under the organization's live
  policy (limits, reserve, pauses) read in the same atomic step.

  Input:
    KEYS[1]            org log         sorted set: permit id -> time the request is counted until (ms)
    KEYS[2]            org inflight    sorted set: permit id -> in-flight deadline (ms)
    KEYS[3]            org block       string (reason), PX expiry for a 429, no expiry for "until unblock"
    KEYS[4]            lease hash      learner id -> "holder deadline contestedAt" (see Lease below)
    KEYS[5]            job lock        BullMQ's lock of the job asking (string: its token)
    KEYS[3i+3..3i+5]   token i's log, inflight and block (i = 1..n, same meanings), n >= 0
    KEYS[3n+6]         policy hash     the organization's live policy (see Policy below; may be absent)
    KEYS[3n+7]         pace hash       'org' and 'tok:<id>' -> the bucket's tat (see Pacing below)
    KEYS[3n+8]         breaker hash    the error budget (judge-outcome.lua): `storm` set while most answers
                                       are server errors, `probe` = "holder deadline" (see Probe below)

    ARGV[1]  token limit: most permits per token window      (fallback when the policy has no `token`)
    ARGV[2]  token window (ms)                               (idem)
    ARGV[3]  org limit: most permits per org window          (fallback when the policy has no `org`)
    ARGV[4]  org window (ms)                                 (idem)
    ARGV[5]  in-flight TTL (ms): the request timeout plus a margin for a server that counts late
    ARGV[6]  random suffix that makes the permit id unique
    ARGV[7]  learner id the permit is for ('' = no lease: a bare budget permit, as in benchmarks)
    ARGV[8]  lease holder (the job's lock token, or any id unique to this attempt)
    ARGV[9]  the job's lock token, checked against KEYS[5] ('' = do not check)
    ARGV[10] lease grace (ms): how long an expired lease of another holder is contested before it is
             taken over (its holder may be alive with a response it could not record yet)
    ARGV[11] burst: the buckets' size, "N" or "P%" ('' = no pacing)  (fallback when the policy has no
             `burst`)
    ARGV[11+i] token i's id (its non-secret fingerprint), for its policy fields

  Output:
    {1, permitId, tokenIndex (1-based), now, tookOver, tokenKeyTtl, orgKeyTtl, probe (0|1)}
        granted (tookOver 1: the learner's lease was taken over from a holder that died). The key TTLs
        are the ones this step computed from the windows in effect: a settle passes them on, so no
        write ever gives a log a shorter life than the window it is counted over needs. probe 1: the
        permit is the one probe of a 5xx storm (its server error uses no attempt).
    {0, waitMs, scope, allBlockedIndefinitely (0|1), now}    refused, nothing written but housekeeping
    Both end with one more element: {field, value, ...}, the policy's rate fields that are malformed
    (includes/policy.lua lt_rate: outside the bounds the parser sets) and were ignored for the fallback;
    empty when none. A malformed value is never applied, and never silently: the caller logs it.
      scope: 'token' | 'org' | 'blocked-token' | 'blocked-org' | 'no-token' | 'lease' | 'lost-lock'
             | 'paused' | 'pace' | 'run-window' | 'run-window-stale' | 'probe'
      ('pace': a bucket is empty; 'run-window': outside the run window, waitMs until it opens;
      'run-window-stale': the stored open intervals end before now: the caller computes them again from
      the calendar and asks again, see Run window below)
      waitMs: no permit can exist before now + waitMs (unless a permit is released, a block lifted or
      the policy changed early; releases and unblocks are announced on the events channel, and so is
      every policy change). When every token (or the org) is blocked until an unblock or paused, waitMs
      is a sentinel (one window) and allBlockedIndefinitely is 1.

  Policy: the organization's hash (src/limiter/policy.ts; its fields: docs/limits.md, "The policy
  hash"), read in the same step as the budget, so the fleet enforces one policy and a change holds for
  every acquire after it. `reserve` = N: the org scope grants at most org max - N. `paused` grants
  nothing, `paused:<id>` skips a token ('paused' when all are). An absent field falls back to ARGV; so
  does a malformed rate, named in the reply.

  Learned limits (docs/budget.md): a 429 below our count teaches learn.lua a limit "max at"; in force
      limit = min(configured, max + step * floor((now - at) / probeEvery))
      step = max(1, floor(configured / 20)),  probeEvery = max(window, min(4 * window, 1 h))
  (configured: for the organization, less the reserve). Once it reaches the configured limit the entry
  is deleted here. It only lowers what is granted: the proof below covers it.

  Lease: one call in flight per learner, taken here with the permit, only by a job that still holds its
  BullMQ lock ('lost-lock'). Another holder's lease refuses ('lease', until its deadline); an expired
  one is marked contested and taken over only after the grace (a live holder records within it, which
  frees the lease). finish-attempt.lua frees it with the record of the call.

  Pacing (docs/pacing.md): a bucket per scope in GCRA form, `tat` in the pace hash, T = window / max.
  Granted when now >= tat - (burst - 1) * T (tat = max(tat, now)); the grant sets tat += T. It only
  refuses more than the windows, so every guarantee holds with it; a burst as large as the limit is no
  pacing. The hash expires when every bucket is full; a released permit does not refill.

  Run window (decision 15): the policy's `open` = "horizon s1 e1 ...", intervals [s, e) in Redis ms.
  Outside them: 'run-window', wait until the next s; past the horizon: 'run-window-stale'. No field:
  always open.

  Probe (docs/guard-rails.md, "A 5xx storm"): while the breaker hash has `storm`, a learner's permit is
  granted only with `probe` = "holder deadline"; another holder's refuses 'probe' until its deadline.
  judge-outcome.lua frees it with the answer and announces it.

  Clock: Redis TIME only (includes/clock.lua), one clock for every process; hosts slew, never step.

  Counting. A scope's count at `now` = log entries with score >= now - window (inclusive: see below)
  + every in-flight entry. An in-flight entry whose deadline has passed (holder died or hung) is moved
  into the log with score = its deadline, the latest moment the server may have counted it; log entries
  older than the window are trimmed. So budget is never leaked for ever, and never freed early.
  Key TTLs are only ever extended, never shortened (here, in settle.lua and in finish-attempt.lua): a
  key lives at least window + in-flight TTL + 1 s after its last write, for the longest window any
  write of it was made under.

  Why no window of the server ever holds more than N (proof sketch; keep it true):
    Request i is acquired at a_i, sent at send_i > a_i, counted by the server at some s_i in
    [send_i, response_i], and settled after its response: its log score is Redis TIME at settle, so
    score_i >= response_i >= s_i. A request that never got an answer keeps its in-flight entry until its
    deadline d_i = a_i + I (I = in-flight TTL: abandon/expiry), which by the choice of I (more than the
    request timeout) is >= s_i; release is only for a request that provably never reached the server
    (no s_i at all).
    Take any N+1 requests that the server counts inside one window of length W: rolling or fixed, any
    alignment, open or closed at either end (a calendar day is a fixed window). Then s_i >= s_j - W for
    any two of them. Let j be the one acquired last (scripts run one at a time, so acquires are totally
    ordered). At a_j every other i of them had been acquired, and was either in flight (counted), or in
    the log with score_i >= s_i >= s_j - W >= a_j - W (counted, the window being inclusive), or released
    (then the server never counted it: not one of the N+1). So j saw >= N counted and was refused:
    contradiction. Scores are whole ms (floor of TIME): floor(score_i) >= floor(a_j) - W still holds,
    which is why the log counts score >= now - W and an entry frees at score + W + 1, not + W.
    The same argument holds per token and per organization, and a permit is written to both or neither.
    It needs every such i still in the log at a_j: a trim at time t under window W removes only scores
    < t - W <= a_j - W, and the key outlives score_i + W + 1 (its TTL, computed from W by the acquire of
    i and passed on to its settle, is only ever extended).

  When the policy changes (limits set/reset, a reserve). Say the scope's limit is (N, W) for every
  acquire from time T on. The argument above needs all N+1 requests acquired under (N, W), i.e. at or
  after T. A request counted at s_i >= T + I was acquired at a_i >= s_i - I >= T (the server counts a
  request within I of its acquire, the same fact as d_i >= s_i). So the new limit holds in every server
  window that begins at T + I or later: a lowered limit holds from one in-flight TTL after the change
  at the latest (with the default REQUEST_TIMEOUT of 30 s, one minute). Windows that begin earlier may
  still hold requests granted under the old limit before T: those were already sent, and nothing can
  take them back. Every acquire after T counts everything in the log and in flight, old permits included,
  so in practice the new limit holds as soon as the requests in flight at T are answered. A pause holds
  from the step that writes it: no permit is granted after it; the calls in flight finish.

  Wait (exact): a scope with count C >= max frees a slot when k = C - max + 1 entries have left it.
  If the log holds >= k entries, that is when the k-th oldest ages out: score_k + W + 1 - now. Otherwise
  in-flight entries must leave too; one leaves no earlier than its settle (>= now) + W + 1, so W + 1 is
  the exact lower bound, and the caller simply asks again then. The refusal's wait =
  max(org wait, min over tokens not blocked for good of max(token wait, token block ttl)). A policy
  change can make a slot free earlier: callers must not sleep longer than the policy recheck bound.
]]
--- @keys 8+
--- @include "policy"
--- @include "clock"
local now, nowMicros = lt_now()

local inflightTtl = tonumber(ARGV[5])
local tokenCount = (#KEYS - 8) / 3
local policyKey = KEYS[#KEYS - 2]
local paceKey = KEYS[#KEYS - 1]
local breakerKey = KEYS[#KEYS]
local learner, holder, lockToken, leaseGrace = ARGV[7], ARGV[8], ARGV[9], tonumber(ARGV[10]) or 0

-- The live policy (includes/policy.lua): absent fields fall back to ARGV.
local policy = lt_policy(policyKey)
local function rate(field, max, window)
  local m, w = lt_rate(policy, field, max, window)
  return m, w
end
-- A learned limit in force ("Learned limits" above): the learned max plus the probe steps
-- since, or `limit` once reached (the entry then forgotten, lazily).
local function learned(field, limit, configured, window)
  local value, m = lt_learned(policy, field, limit, configured, window, now)
  if m == nil and policy[field] and limit > 0 then
    redis.call('HDEL', policyKey, field)
  end
  return value
end

-- Every reply ends with the policy's malformed rate fields this step met and ignored (lt_rate:
-- {field, value, ...}, empty when none), for the caller to say so.
local function reply(r)
  r[#r + 1] = lt_malformed
  return r
end

local tokenMax, tokenWindow = rate('token', tonumber(ARGV[1]), tonumber(ARGV[2]))
local orgMax, orgWindow = rate('org', tonumber(ARGV[3]), tonumber(ARGV[4]))
orgMax = learned('learned:org', orgMax - math.max(0, tonumber(policy['reserve']) or 0), orgMax, orgWindow)
-- The burst: the policy's, or the fallback when it has none or a malformed one (named in the
-- reply).
local burstSpec = lt_burst_spec(policy, ARGV[11])
local pace = {}
if burstSpec ~= '' and burstSpec ~= '100%' then
  pace = lt_policy(paceKey)
end

-- Keys vanish when idle: an entry matters for at most TTL + window after the write that made it.
local orgKeyTtl = orgWindow + inflightTtl + 1000

-- Never shortens a TTL (a key written under a longer window keeps its longer life).
local function extend(key, ttl)
  if redis.call('PTTL', key) < ttl then
    redis.call('PEXPIRE', key, ttl)
  end
end

-- Moves expired in-flight entries into the log at their deadline, trims the log to the window,
-- and returns the numbers of log and in-flight entries.
local function refresh(logKey, inflightKey, window, keyTtl)
  local expired = redis.call('ZRANGE', inflightKey, '-inf', now, 'BYSCORE', 'WITHSCORES')
  if #expired > 0 then
    for i = 1, #expired, 2 do
      redis.call('ZADD', logKey, 'GT', expired[i + 1], expired[i])
    end
    redis.call('ZREMRANGEBYSCORE', inflightKey, '-inf', now)
    extend(logKey, keyTtl)
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
  return reply({0, tokenWindow, 'no-token', 1, now})
end

local tookOver = 0
if learner ~= '' then
  if lockToken ~= '' and redis.call('GET', KEYS[5]) ~= lockToken then
    return reply({0, 0, 'lost-lock', 0, now})
  end
  local lease = redis.call('HGET', KEYS[4], learner)
  if lease then
    local owner, deadline, contested = string.match(lease, '^(%S+) (%d+) (%d+)$')
    deadline, contested = tonumber(deadline) or 0, tonumber(contested) or 0
    if owner ~= holder then
      if now < deadline then
        return reply({0, deadline - now, 'lease', 0, now})
      end
      if contested == 0 then
        redis.call('HSET', KEYS[4], learner, string.format('%s %d %d', owner, deadline, now))
        return reply({0, math.max(1, leaseGrace), 'lease', 0, now})
      end
      if now < contested + leaseGrace then
        return reply({0, contested + leaseGrace - now, 'lease', 0, now})
      end
      tookOver = 1
    end
  end
end

-- A paused organization gets nothing until it is resumed.
if policy['paused'] then
  return reply({0, orgWindow, 'paused', 1, now})
end

-- The run window: 0 when open now, else the ms until it opens (or to the horizon), -1 when
-- stale.
local function runWindowWait(open)
  local horizon, s
  for n in string.gmatch(open, '%d+') do
    n = tonumber(n)
    if horizon == nil then
      horizon = n
    elseif s == nil then
      s = n
    else
      if now < s then
        return s - now
      end
      if now < n then
        return 0
      end
      s = nil
    end
  end
  if horizon == nil or now >= horizon then
    return -1
  end
  return horizon - now
end
if policy['open'] then
  local wait = runWindowWait(policy['open'])
  if wait < 0 then
    return reply({0, 1, 'run-window-stale', 0, now})
  end
  if wait > 0 then
    return reply({0, wait, 'run-window', 0, now})
  end
end

-- The 5xx storm (see Probe above): one probe at a time.
local probing = false
if learner ~= '' and redis.call('HEXISTS', breakerKey, 'storm') == 1 then
  local probe = redis.call('HGET', breakerKey, 'probe')
  if probe then
    local owner, deadline = string.match(probe, '^(%S+) (%d+)$')
    deadline = tonumber(deadline) or 0
    if owner ~= holder and now < deadline then
      return reply({0, deadline - now, 'probe', 0, now})
    end
  end
  probing = true
end

-- A scope's bucket now: ms until it allows a permit (0: now), tat after a grant (nil: not
-- paced).
local function paceOf(field, max, window)
  if burstSpec == '' or max <= 0 then
    return 0, nil
  end
  local b = lt_burst(burstSpec, nil, max)
  if b == nil then
    return 0, nil
  end
  return lt_pace(pace[field], now, max, window, b)
end

-- PTTL: -2 no block, -1 blocked until unblock, > 0 blocked for that many ms.
local orgBlock = redis.call('PTTL', KEYS[3])
if orgBlock == -1 then
  return reply({0, orgWindow, 'blocked-org', 1, now})
end
local orgLog, orgInflight = refresh(KEYS[1], KEYS[2], orgWindow, orgKeyTtl)
local orgWait = windowWait(KEYS[1], orgLog, orgInflight, orgMax, orgWindow)
local orgPaceWait, orgTat = paceOf('org', orgMax, orgWindow)

-- The usable token with the most room left, so load spreads over the pool (first one on a tie).
-- A paused token is skipped like one blocked until unblock.
local tokens = {}
local best, bestRemaining = 0, 0
local anyUsable, anyPaused = false, false
for i = 1, tokenCount do
  local base = 3 * i + 2
  local id = ARGV[11 + i] or ''
  local max, window = rate('tok:' .. id, tokenMax, tokenWindow)
  if id ~= '' then
    max = learned('learned:tok:' .. id, max, max, window)
  end
  local keyTtl = window + inflightTtl + 1000
  local paused = id ~= '' and policy['paused:' .. id] ~= nil
  local blockTtl = redis.call('PTTL', KEYS[base + 3])
  local logCount, inflightCount = refresh(KEYS[base + 1], KEYS[base + 2], window, keyTtl)
  local paceWait, tat = paceOf('tok:' .. id, max, window)
  tokens[i] = {logCount, inflightCount, blockTtl, max, window, keyTtl, paused, paceWait, tat}
  if paused then
    anyPaused = true
  elseif blockTtl ~= -1 then
    anyUsable = true
  end
  local remaining = max - logCount - inflightCount
  if not paused and blockTtl == -2 and paceWait == 0 and remaining > bestRemaining then
    best, bestRemaining = i, remaining
  end
end

if orgBlock == -2 and orgWait == 0 and orgPaceWait == 0 and best > 0 then
  -- "<ms>.<µs of that ms>-<random>": fine enough to order one Redis's permits (learn.lua).
  local permitId = string.format('%d.%03d-%s', now, nowMicros, ARGV[6])
  local deadline = now + inflightTtl
  local tokenKeyTtl = tokens[best][6]
  local inflightKey = KEYS[3 * best + 4]
  redis.call('ZADD', inflightKey, deadline, permitId)
  extend(inflightKey, tokenKeyTtl)
  redis.call('ZADD', KEYS[2], deadline, permitId)
  extend(KEYS[2], orgKeyTtl)
  if learner ~= '' then
    redis.call('HSET', KEYS[4], learner, string.format('%s %d 0', holder, deadline))
  end
  if probing then
    redis.call('HSET', breakerKey, 'probe', string.format('%s %d', holder, deadline))
  end
  -- The buckets of the org and of the token granted (when paced): the key lives until both are full
  -- again, at the latest tat written (a bucket is full from its tat on).
  local bestTat = tokens[best][9]
  local latest = 0
  if orgTat then
    redis.call('HSET', paceKey, 'org', string.format('%.3f', orgTat))
    latest = orgTat
  end
  if bestTat then
    redis.call('HSET', paceKey, 'tok:' .. (ARGV[11 + best] or ''), string.format('%.3f', bestTat))
    latest = math.max(latest, bestTat)
  end
  if latest > 0 then
    extend(paceKey, math.ceil(latest - now) + 1000)
  end
  return reply({1, permitId, best, now, tookOver, tokenKeyTtl, orgKeyTtl, probing and 1 or 0})
end

if not anyUsable then
  if anyPaused then
    return reply({0, tokenWindow, 'paused', 1, now})
  end
  return reply({0, tokenWindow, 'blocked-token', 1, now})
end

local tokenWait, tokenScope = -1, 'token'
for i = 1, tokenCount do
  local t = tokens[i]
  if t[3] ~= -1 and not t[7] then
    local wait = windowWait(KEYS[3 * i + 3], t[1], t[2], t[4], t[5])
    local scope = 'token'
    if t[8] > wait then
      wait, scope = t[8], 'pace'
    end
    if t[3] >= 0 and t[3] >= wait then
      wait, scope = t[3], 'blocked-token'
    end
    if tokenWait < 0 or wait < tokenWait then
      tokenWait, tokenScope = wait, scope
    end
  end
end

local orgScope = 'org'
if orgPaceWait > orgWait then
  orgWait, orgScope = orgPaceWait, 'pace'
end
if orgBlock >= 0 and orgBlock >= orgWait then
  orgWait, orgScope = orgBlock, 'blocked-org'
end
if orgWait > 0 and orgWait >= tokenWait then
  return reply({0, math.max(1, orgWait), orgScope, 0, now})
end
return reply({0, math.max(1, tokenWait), tokenScope, 0, now})
