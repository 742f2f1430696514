-- Release one hold of a fair lock; once free, wake the queue head only.
-- KEYS[1] lock hash   KEYS[2] queue LIST   KEYS[3] deadline ZSET
-- ARGV[1] unlock message   ARGV[2] lease ms re-applied to the remaining holds
-- ARGV[3] owner field   ARGV[4] waiter channel prefix (channel = prefix .. owner; channels
-- are not keys, so the script builds them)
-- Waiters' deadlines move with the lock's expiry (see fair_acquire.lua): once the lock is
-- free, the head has its allowance from now on to take it.
-- Returns nil when the owner holds nothing, 0 when holds remain, 1 when the lock was freed.
-- The wake-ups (PUBLISH, which an ACL can refuse) come before the DEL (see wake_head).
-- @include server_time
-- @include fair_shift
-- @include fair_wake_head
-- @include kinds

local wrong = kind_error(KEYS[1], false) or type_error(KEYS[2], 'list')
    or type_error(KEYS[3], 'zset')
if wrong then
    return wrong
end

if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local pttl = redis.call('pttl', KEYS[1])
if (tonumber(redis.call('hget', KEYS[1], ARGV[3])) or 0) > 1 then
    redis.call('hincrby', KEYS[1], ARGV[3], -1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    if pttl >= 0 then
        shift(KEYS[3], tonumber(ARGV[2]) - pttl)
    end
    return 0
end
local moved = pttl >= 0 and -pttl or 0
wake_head(KEYS[2], KEYS[3], ARGV[4], ARGV[1], moved)
redis.call('del', KEYS[1])
shift(KEYS[3], moved)
return 1
