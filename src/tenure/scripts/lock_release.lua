-- Release one hold of a reentrant lock.
-- KEYS[1] lock hash   KEYS[2] channel
-- ARGV[1] unlock message   ARGV[2] lease ms re-applied to the remaining holds   ARGV[3] owner
-- Returns nil when the owner holds nothing, 0 when holds remain, 1 when the lock was freed.
-- The PUBLISH (which an ACL can refuse) comes before the DEL: a refused one changes nothing,
-- and as the script is atomic nobody is woken before the key is gone.
-- @include kinds

local wrong = kind_error(KEYS[1], false)
if wrong then
    return wrong
end

if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
if (tonumber(redis.call('hget', KEYS[1], ARGV[3])) or 0) > 1 then
    redis.call('hincrby', KEYS[1], ARGV[3], -1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
redis.call('publish', KEYS[2], ARGV[1])
redis.call('del', KEYS[1])
return 1
