-- Campaign: join the candidates (or refresh the caller's entry) and elect the first live one
-- if nobody leads. KEYS as _election.lua.
-- ARGV[1] lease ms   ARGV[2] owner   ARGV[3] value   ARGV[4] candidate entry ms
-- ARGV[5] channel    ARGV[6] client name
-- ARGV[7] the term its client records the caller leading, '' when it records none
-- Returns {1, term} when the caller leads (its lease re-applied; a new value proclaimed),
-- {-1, 0} when it no longer leads the recorded term (that leadership was lost: nothing is
-- done, no new term drawn over the loss), else {0, the leader's remaining lease in ms}.
-- @include kinds
-- @include server_time
-- @include election

local wrong = election_wrong()
if wrong then
    return wrong
end
local owner = ARGV[2]
if ARGV[7] ~= '' then
    local leader = redis.call('hmget', KEYS[1], 'owner', 'term')
    if leader[1] ~= owner or leader[2] ~= ARGV[7] then
        return {-1, 0}
    end
end
if redis.call('hget', KEYS[1], 'owner') == owner then
    redis.call('pexpire', KEYS[1], ARGV[1])
    local term = redis.call('hget', KEYS[1], 'term')
    if redis.call('hget', KEYS[1], 'value') ~= ARGV[3] then
        redis.call('hset', KEYS[1], 'value', ARGV[3])
        log_leader()
        redis.pcall('publish', ARGV[5], term)
    end
    return {1, tonumber(term)}
end
local now = now_ms()
if not redis.call('zscore', KEYS[4], owner) then
    redis.call('rpush', KEYS[3], owner)
end
redis.call('zadd', KEYS[4], now + tonumber(ARGV[4]), owner)
redis.call('hset', KEYS[5], owner, ARGV[3], owner .. '|lease', ARGV[1], owner .. '|client', ARGV[6])
local term = settle(now, ARGV[5])
if term and redis.call('hget', KEYS[1], 'owner') == owner then
    return {1, term}
end
return {0, redis.call('pttl', KEYS[1])}
