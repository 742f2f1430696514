-- A candidate stops campaigning (timeout, cancellation, error): its entry goes. If it was
-- elected meanwhile and its client does not know (ARGV[3] = '0'), it steps down at once.
-- KEYS as _election.lua.   ARGV[1] owner   ARGV[2] channel   ARGV[3] '1' if its client
-- records it as leader
-- Returns 1 when it stepped down, else 0.
-- @include kinds
-- @include server_time
-- @include election

local wrong = election_wrong()
if wrong then
    return wrong
end
local owner = ARGV[1]
redis.call('lrem', KEYS[3], 0, owner)
forget_candidate(owner)
if ARGV[3] == '1' or redis.call('hget', KEYS[1], 'owner') ~= owner then
    return 0
end
redis.call('del', KEYS[1])
if not settle(now_ms(), ARGV[2]) then
    log_vacant()
    redis.pcall('publish', ARGV[2], '0')
end
return 1
