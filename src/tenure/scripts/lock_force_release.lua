-- Delete a lock whoever holds it and wake its waiters.
-- KEYS[1] lock hash   KEYS[2] channel   ARGV[1] unlock message
-- Returns 1 when something was held, else 0. Publishes before deleting (see lock_release.lua).
-- @include kinds

local wrong = kind_error(KEYS[1], false)
if wrong then
    return wrong
end

if redis.call('exists', KEYS[1]) == 0 then
    return 0
end
redis.call('publish', KEYS[2], ARGV[1])
redis.call('del', KEYS[1])
return 1
