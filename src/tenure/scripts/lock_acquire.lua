-- Acquire (or re-enter) a reentrant lock.
-- KEYS[1] lock hash   ARGV[1] lease ms   ARGV[2] owner field
-- Returns nil when acquired, else the holder's remaining lease in ms (-1: no expiry).
-- @include kinds

local wrong = kind_error(KEYS[1], false)
if wrong then
    return wrong
end

if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
