-- Release one hold of a reentrant lock.
-- KEYS[1] lock hash   KEYS[2] channel
-- ARGV[1] unlock message   ARGV[2] lease ms re-applied to the remaining holds   ARGV[3] owner
-- Returns nil when the owner holds nothing, 0 when holds remain, and when the lock was freed
-- 1 + the number of subscribers the unlock reached (the releaser need not barge ahead of them).
-- One HMGET answers the kind checks and the owner's count (lock_count).
-- The PUBLISH (which an ACL can refuse) comes before the DEL: a refused one changes nothing,
-- and as the script is atomic nobody is woken before the key is gone.
-- @include kinds

local found, wrong = lock_count(KEYS[1], ARGV[3])
if wrong then
    return wrong
end
local count = tonumber(found)
if not count then
    return nil
end
if count > 1 then
    redis.call('hincrby', KEYS[1], ARGV[3], -1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
local heard = redis.call('publish', KEYS[2], ARGV[1])
redis.call('del', KEYS[1])
return 1 + heard
