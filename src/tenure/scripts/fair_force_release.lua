-- Delete a fair lock whoever holds it and wake the queue head.
-- KEYS[1] lock hash   KEYS[2] queue LIST   KEYS[3] deadline ZSET
-- ARGV[1] unlock message   ARGV[2] waiter channel prefix (channel = prefix .. owner; channels
-- are not keys, so the script builds them)
-- Waiters' deadlines move with the lock's expiry (see fair_acquire.lua).
-- Returns 1 when something was held, else 0. The wake-ups (PUBLISH, which an ACL can
-- refuse) come before the DEL (see wake_head).
-- @include server_time
-- @include fair_shift
-- @include fair_wake_head
-- @include kinds

local wrong = kind_error(KEYS[1], false) or type_error(KEYS[2], 'list')
    or type_error(KEYS[3], 'zset')
if wrong then
    return wrong
end

if redis.call('exists', KEYS[1]) == 0 then
    return 0
end
local pttl = redis.call('pttl', KEYS[1])
local moved = pttl > 0 and -pttl or 0
wake_head(KEYS[2], KEYS[3], ARGV[2], ARGV[1], moved)
redis.call('del', KEYS[1])
shift(KEYS[3], moved)
return 1
