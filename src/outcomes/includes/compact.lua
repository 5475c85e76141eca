--[[
  Compaction of a final record (finish-attempt.lua, compact-records.lua; docs/redis-memory.md): its story
  (`h`, `au`) goes to one audit entry of kind 'record' whose id it keeps (`f`; `prev` chains them); merged
  attempt ids stay as short hashes (`ah`), lost answers as `hc`; the dedupe keys (`ak`) are deleted.
]]

local function lt_list(v)
  if type(v) == 'table' then return v end
  return {}
end

local function lt_push(t, x, max)
  t[#t + 1] = x
  while #t > max do table.remove(t, 1) end
  return t
end

-- An attempt id as a 40-bit hash: two of one learner's last ten colliding is a one in 10^11 chance.
local function lt_short(id)
  return string.sub(redis.sha1hex(id), 1, 10)
end

-- Compacts `rec` (a table, changed in place) of learner `learner`, final in bucket `b` of run `run`, at
-- time `at` (ms, the story entry's `at`): writes the story entry to `auditKey` and deletes the learner's
-- dedupe keys from `idsKey`.
local function lt_compact(rec, learner, run, b, at, auditKey, idsKey)
  local hc = rec['hc'] or ''
  for _, h in ipairs(lt_list(rec['h'])) do
    if type(h) == 'table' and h[2] == 'network-error' and not string.find(hc, 'n', 1, true) then hc = hc .. 'n' end
    if type(h) == 'table' and h[2] == 'bad-response' and not string.find(hc, 'u', 1, true) then hc = hc .. 'u' end
  end
  if hc ~= '' then rec['hc'] = hc end
  local fields = {'learnerId', learner, 'runId', run, 'transferId', rec['x'] or '', 'kind', 'record',
    'at', tostring(at), 'raw', '', 'bucket', b, 'history', cjson.encode(lt_list(rec['h'])),
    'auditIds', cjson.encode(lt_list(rec['au']))}
  if rec['f'] then
    fields[#fields + 1] = 'prev'
    fields[#fields + 1] = rec['f']
  end
  rec['f'] = redis.call('XADD', auditKey, '*', unpack(fields))
  local ak = lt_list(rec['ak'])
  if #ak > 0 then redis.call('HDEL', idsKey, unpack(ak)) end
  rec['h'], rec['au'], rec['ak'] = nil, nil, nil
  local ah = lt_list(rec['ah'])
  for _, id in ipairs(lt_list(rec['ai'])) do lt_push(ah, lt_short(id), 10) end
  rec['ah'], rec['ai'] = ah, nil
  -- The outcome code is the bucket's name most of the time: not stored twice (decodeRecord puts it back).
  if rec['c'] == b then rec['c'] = nil end
end
