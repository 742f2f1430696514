-- Proclaim: the leader changes its value (same term) and observers are told.
-- KEYS as _election.lua.   ARGV[1] owner   ARGV[2] value   ARGV[3] channel
-- Returns nil when the caller does not lead, else the term.
-- @include kinds
-- @include server_time
-- @include election

local refused = not_leader(ARGV[1])
if refused ~= nil then
    return refused
end
local term = redis.call('hget', KEYS[1], 'term')
redis.call('hset', KEYS[1], 'value', ARGV[2])
log_leader()
redis.pcall('publish', ARGV[3], term)
return tonumber(term)
