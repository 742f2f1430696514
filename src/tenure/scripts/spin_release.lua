-- Release one hold of a spin lock (Redisson RSpinLock): lock_release.lua without the PUBLISH.
-- Spin-lock waiters retry on a back-off and listen on no channel, so nothing is published.
-- KEYS[1] lock hash   ARGV[1] lease ms re-applied to the remaining holds   ARGV[2] owner
-- Returns nil when the owner holds nothing, 0 when holds remain, 1 when the lock was freed.
-- @include kinds

local found, wrong = lock_count(KEYS[1], ARGV[2])
if wrong then
    return wrong
end
local count = tonumber(found)
if not count then
    return nil
end
if count > 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], -1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 0
end
redis.call('del', KEYS[1])
return 1
