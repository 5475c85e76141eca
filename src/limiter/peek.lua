#!lua flags=no-writes
--[[
  Read the budget of one organization and its tokens without writing anything (the no-writes flag
  makes Redis refuse any write): what acquire would see, with expired in-flight entries counted as
  the log entries acquire would turn them into.

  Input:
    KEYS: as acquire.lua (org log, org inflight, org block, then per token log, inflight, block)
    ARGV[1]  token limit   ARGV[2]  token window (ms)   ARGV[3]  org limit   ARGV[4]  org window (ms)

  Output: {now, orgView, tokenView 1, ..., tokenView n}, each view
    {used, inflight, nextFreeInMs, blockReason ('' when none), blockTtl (-2 none, -1 until unblock, ms)}
    used: counted entries that are no longer in flight; inflight: entries still before their deadline;
    nextFreeInMs: 0 when the window has room, else the wait acquire would compute for this scope
    (blocks aside: they are reported separately).
]]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local function view(logKey, inflightKey, blockKey, max, window)
  local from = now - window
  local logCount = redis.call('ZCOUNT', logKey, from, '+inf')
  local expired = redis.call('ZCOUNT', inflightKey, from, now)
  local inflight = redis.call('ZCOUNT', inflightKey, string.format('(%d', now), '+inf')
  local used = logCount + expired
  local nextFree = 0
  local k = used + inflight - max + 1
  if k > 0 then
    if k <= used then
      -- The k-th oldest of the log entries and the expired in-flight deadlines in the window.
      local scores = {}
      local a = redis.call('ZRANGE', logKey, from, '+inf', 'BYSCORE', 'LIMIT', 0, k, 'WITHSCORES')
      local b = redis.call('ZRANGE', inflightKey, from, now, 'BYSCORE', 'LIMIT', 0, k, 'WITHSCORES')
      for i = 2, #a, 2 do
        scores[#scores + 1] = tonumber(a[i])
      end
      for i = 2, #b, 2 do
        scores[#scores + 1] = tonumber(b[i])
      end
      table.sort(scores)
      nextFree = scores[k] + window + 1 - now
    else
      nextFree = window + 1
    end
  end
  local reason = redis.call('GET', blockKey)
  return {used, inflight, nextFree, reason or '', redis.call('PTTL', blockKey)}
end

local out = {now, view(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[3]), tonumber(ARGV[4]))}
for i = 1, (#KEYS - 3) / 3 do
  out[#out + 1] = view(KEYS[3 * i + 1], KEYS[3 * i + 2], KEYS[3 * i + 3], tonumber(ARGV[1]), tonumber(ARGV[2]))
end
return out
