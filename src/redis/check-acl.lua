#!lua flags=no-writes
--[[
  Which of the commands the tool sends the current ACL user may not run (acl-check.ts), answered by
  Redis itself (redis.acl_check_cmd, Redis 7) in one round trip, with no side effect: the check must
  work for a user without ACL DRYRUN (an @admin command a least-privilege user does not have) and on a
  Redis that refuses writes (hence no-writes).

  Input:
    KEYS     none (the keys below are only named to the check, never read)
    ARGV[1]  JSON array of checks, each { "argv": [command, arguments...], "name": n }: the first n
             strings of argv name the command (2 for a subcommand such as CLIENT SETNAME), the rest
             are its arguments (keys and channels under the tool's prefix)

  Output: one entry per refused check, in input order: { index (1-based), 0 | 1 }, 1 when the command
  itself is allowed (so its keys or its channel are what is refused), 0 when the command is not. A
  command this Redis does not know is skipped (acl_check_cmd raises an error for it). A Redis before 7
  fails to compile the script (the #!lua line): the caller then probes instead.
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
