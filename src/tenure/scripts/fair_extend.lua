-- Add time to the caller's hold of a fair lock, moving the waiters' deadlines with the
-- lock's expiry (see fair_acquire.lua).
-- KEYS[1] lock hash   KEYS[2] deadline ZSET
-- ARGV[1] owner field   ARGV[2] ms to add   ARGV[3] longest lease ms
-- Returns nil when the owner holds nothing, else the new remaining lease in ms (capped at
-- ARGV[3]); -1 when the key has no expiry (left as it is).
-- @include fair_shift
-- @include kinds
-- @include extend_hash

local wrong = kind_error(KEYS[1], false) or type_error(KEYS[2], 'zset')
if wrong then
    return wrong
end

local ttl, pttl = extend_hash(KEYS[1], ARGV[1], ARGV[2], ARGV[3])
if ttl and pttl >= 0 then
    shift(KEYS[2], ttl - pttl)
end
return ttl
