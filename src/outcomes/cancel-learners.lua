--[[
  Withdraws learners of one organization before their call (ops/actions/cancel.ts), each decided
  atomically against its lease and record:
  - lease held and not past deadline plus grace: 'in-flight', left alone;
  - `queued`, `retrying`, `held` or `awaiting-approval`: becomes `cancelled` (t, cb): 'cancelled:<run id>';
  - else 'none' (no record), 'state:<bucket>', or 'run:<run>' (a run not declared: the caller asks again).
  The worker re-reads the record under its lease (worker/admission.ts), so cancel and call never both win.

  KEYS[1]  outcomes hash ({org}:out)       KEYS[2]  org counters ({org}:counts)
  KEYS[3]  lease hash ({org}:lease)
  KEYS[2i+2], KEYS[2i+3]  for run i = 1..n named in ARGV[7], in that order: its counters
           ({org}:run:<id>) and its failure index ({org}:run:<id>:fail)
  KEYS[2n+4], ... the index of each bucket named in ARGV[4], in that order

  ARGV[1]  '1': dry run, decide and write nothing      ARGV[2] time (ms), the record's and the indexes'
  ARGV[3]  space-separated failure buckets             ARGV[4] space-separated indexed buckets
  ARGV[5]  who (the actor, e.g. cli:ann@host)          ARGV[6] lease grace (ms)
  ARGV[7]  space-separated run ids (see KEYS[4..])     ARGV[8..] learner ids

  Returns one string per learner, as above.
]]
--- @keys 4+
--- @include "record"
local dry, now, who, grace = ARGV[1] == '1', tonumber(ARGV[2]), ARGV[5], tonumber(ARGV[6]) or 0
local fail = lt_names(ARGV[3])

local runs, nruns = {}, 0
for id in string.gmatch(ARGV[7], '%S+') do
  runs[id] = {KEYS[4 + 2 * nruns], KEYS[5 + 2 * nruns]}
  nruns = nruns + 1
end
local idx = lt_index_keys(ARGV[4], 4 + 2 * nruns)

-- The lease's clock is Redis TIME (acquire.lua), so this is.
local time = redis.call('TIME')
local clock = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local CANCELLABLE = {queued = true, retrying = true, held = true, ['awaiting-approval'] = true}
local orgDelta, runDeltas = {}, {}
local results = {}
for i = 8, #ARGV do
  local learner = ARGV[i]
  local result
  local lease = redis.call('HGET', KEYS[3], learner)
  local deadline = 0
  if lease then deadline = tonumber(string.match(lease, '^%S+ (%d+)')) or 0 end
  if lease and clock < deadline + grace then
    result = 'in-flight'
  else
    local rec = lt_decode(redis.call('HGET', KEYS[1], learner))
    local bucket, run = '', ''
    if rec then bucket, run = rec['b'] or '', rec['r'] or '' end
    if not rec then
      result = 'none'
    elseif not CANCELLABLE[bucket] then
      result = 'state:' .. bucket
    elseif not runs[run] then
      result = 'run:' .. run
    else
      result = 'cancelled:' .. run
      if not dry then
        rec['b'], rec['t'], rec['cb'] = 'cancelled', now, who
        rec['c'], rec['s'], rec['e'], rec['m'] = 'cancelled', nil, nil, 'cancelled by ' .. who
        runDeltas[run] = runDeltas[run] or {}
        lt_write(KEYS[1], idx, runs[run][2], fail, runDeltas[run], orgDelta, learner, bucket, run,
          cjson.encode(rec), 'cancelled', run, now)
      end
    end
  end
  results[#results + 1] = result
end

for run, delta in pairs(runDeltas) do lt_apply(runs[run][1], delta) end
lt_apply(KEYS[2], orgDelta)
return results
