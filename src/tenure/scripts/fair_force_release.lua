-- Delete a fair lock whoever holds it and wake the queue head.
-- KEYS[1] lock hash   KEYS[2] queue LIST   KEYS[3] deadline ZSET
-- ARGV[1] unlock message   ARGV[2] waiter channel prefix (channel = prefix .. owner; channels
-- are not keys, so the script builds them)
-- Waiters' deadlines move with the lock's expiry (see fair_acquire.lua).
-- Returns 1 when something was held, else 0.
-- @include server_time
-- @include fair_shift
-- @include fair_wake_head

local pttl = redis.call('pttl', KEYS[1])
if redis.call('del', KEYS[1]) == 0 then
    return 0
end
if pttl > 0 then
    shift(KEYS[3], -pttl)
end
wake_head(KEYS[2], KEYS[3], ARGV[2], ARGV[1])
return 1
