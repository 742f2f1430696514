-- Add time to the caller's hold of a fair lock, moving the waiters' deadlines with the
-- lock's expiry (see fair_acquire.lua).
-- KEYS[1] lock hash   KEYS[2] deadline ZSET
-- ARGV[1] owner field   ARGV[2] ms to add   ARGV[3] longest lease ms
-- Returns nil when the owner holds nothing, else the new remaining lease in ms (capped at
-- ARGV[3]); -1 when the key has no expiry (left as it is).
-- @include fair_shift
-- @include kinds

local wrong = kind_error(KEYS[1], false) or type_error(KEYS[2], 'zset')
if wrong then
    return wrong
end

if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return nil
end
local pttl = redis.call('pttl', KEYS[1])
if pttl < 0 then
    return pttl
end
local ttl = math.min(pttl + tonumber(ARGV[2]), tonumber(ARGV[3]))
redis.call('pexpire', KEYS[1], ttl)
shift(KEYS[2], ttl - pttl)
return ttl
