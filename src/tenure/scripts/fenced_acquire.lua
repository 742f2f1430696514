-- Acquire (or re-enter) a fenced lock and draw a fencing token.
-- KEYS[1] lock hash   KEYS[2] token counter (STRING, no TTL)
-- ARGV[1] lease ms   ARGV[2] owner field
-- ARGV[3] '1' when the caller's client records a hold here (a re-entry expected; optional)
-- Returns {1, token} when acquired (the counter is incremented on every acquisition,
-- re-entries included), else {0, the holder's remaining lease in ms (-1: no expiry)}, or
-- {-1, 0} when a re-entry was expected and the caller holds nothing: its earlier hold was
-- lost, and nothing is granted nor drawn (lock_acquire.lua says why).
-- The INCR (which fails on a counter that is not an integer) comes before the grant, so a
-- failed one grants nothing; a token drawn for a grant that then failed is only skipped.
-- @include kinds

local wrong = kind_error(KEYS[1], false) or type_error(KEYS[2], 'string')
if not wrong and redis.call('exists', KEYS[2]) == 1
        and not tonumber(redis.call('get', KEYS[2])) then
    wrong = redis.error_reply('TENURE_KIND key ' .. KEYS[2] .. ' is not a fencing token counter')
end
if wrong then
    return wrong
end

local reentry = ARGV[3] == '1'
if (not reentry and redis.call('exists', KEYS[1]) == 0)
        or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local token = redis.call('incr', KEYS[2])
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, token}
end
if reentry then
    return {-1, 0}
end
return {0, redis.call('pttl', KEYS[1])}
