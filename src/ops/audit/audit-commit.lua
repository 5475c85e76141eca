--[[
  The end of one archive write (ops/audit/archive.ts), once the entries are fsynced and read back: the
  organization's cursor moves to the last archived id and the stream is trimmed up to it, in one step,
  only if the write's note is still this holder's. A holder that stalled past its lease, whose note the
  next holder has since undone and replaced, moves nothing (its caller then cuts its own write back).

  KEYS[1]  the organization's archive hash ({org}:audit:archive: last, file, size, holder, identity)
  KEYS[2]  the organization's audit stream ({org}:audit)
  ARGV[1]  holder id   ARGV[2] the last archived id   ARGV[3] the id just after it (XTRIM MINID)

  Returns the number of entries trimmed, or -1 when the note is not this holder's (nothing changed).
]]
--- @keys 2
if redis.call('HGET', KEYS[1], 'holder') ~= ARGV[1] then return -1 end
redis.call('HSET', KEYS[1], 'last', ARGV[2])
redis.call('HDEL', KEYS[1], 'file', 'size', 'holder', 'identity')
return redis.call('XTRIM', KEYS[2], 'MINID', ARGV[3])
