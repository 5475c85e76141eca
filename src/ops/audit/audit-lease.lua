--[[
  The audit archiver's lease: one exporter at a time across every process (ops/audit/archive.ts). The
  holder takes it, renews it between writes, and frees it; only the holder may renew or free it, so a
  process that stalled past its lease cannot free the next holder's.

  KEYS[1]  the lease (string: holder id, with a PX expiry)
  ARGV[1]  'take' | 'renew' | 'free'
  ARGV[2]  holder id   ARGV[3] lease (ms)

  Returns 1 when this holder has (take, renew) or freed (free) the lease, else 0.
]]
--- @keys 1
local op, holder, ms = ARGV[1], ARGV[2], ARGV[3]
local current = redis.call('GET', KEYS[1])
if op == 'take' and not current then
  redis.call('SET', KEYS[1], holder, 'PX', ms)
  return 1
end
if current ~= holder then return 0 end
if op == 'free' then
  redis.call('DEL', KEYS[1])
else
  redis.call('PEXPIRE', KEYS[1], ms)
end
return 1
