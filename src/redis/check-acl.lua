#!lua flags=no-writes
--[[
  Which commands the tool sends the current ACL user may not run (acl-check.ts), asked of
  redis.acl_check_cmd (Redis 7): no ACL DRYRUN needed (it is @admin), and no write.

  Input:
    KEYS     none (the keys below are only named to the check, never read)
    ARGV[1]  JSON array of checks, each { "argv": [command, arguments...], "name": n }: the first n
             strings of argv name the command (2 for a subcommand such as CLIENT SETNAME), the rest
             are its arguments (keys and channels under the tool's prefix)

  Output: one entry per refused check, in input order: { index (1-based), 0 | 1 }, 1 when the
  command is allowed (its keys or channel are refused), 0 when it is not. A command Redis does not
  know is skipped; a Redis before 7 fails to compile the script, and the caller probes instead.
]]
--- @keys 0
local checks = cjson.decode(ARGV[1])
local refused = {}
for i, check in ipairs(checks) do
  local known, allowed = pcall(redis.acl_check_cmd, unpack(check.argv))
  if known and not allowed then
    local named = redis.acl_check_cmd(unpack(check.argv, 1, check.name))
    refused[#refused + 1] = { i, named and 1 or 0 }
  end
end
return refused
