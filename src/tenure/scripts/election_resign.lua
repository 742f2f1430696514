-- Resign: the caller steps down and the first live candidate is elected in the same script.
-- KEYS as _election.lua.   ARGV[1] owner   ARGV[2] channel
-- Returns nil when the caller does not lead, 2 when a successor was elected, 1 when the
-- leadership fell vacant ('0' published).
-- @include kinds
-- @include server_time
-- @include election

local refused = not_leader(ARGV[1])
if refused ~= nil then
    return refused
end
redis.call('del', KEYS[1])
if settle(now_ms(), ARGV[2]) then
    return 2
end
log_vacant()
redis.pcall('publish', ARGV[2], '0')
return 1
