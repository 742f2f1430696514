-- Release one hold of a spin lock (Redisson RSpinLock): lock_release.lua without the PUBLISH.
-- Spin-lock waiters retry on a back-off and listen on no channel, so nothing is published.
-- KEYS[1] lock hash   ARGV[1] lease ms re-applied to the remaining holds   ARGV[2] owner
-- Returns nil when the owner holds nothing, 0 when holds remain, 1 when the lock was freed.
-- @include kinds
-- @include release_hold

local held = release_hold(KEYS[1], ARGV[2], ARGV[1])
if held ~= 'last' then
    return held
end
redis.call('del', KEYS[1])
return 1
