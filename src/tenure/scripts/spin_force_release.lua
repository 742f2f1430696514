-- Delete a spin lock whoever holds it; nothing is published (its waiters poll on a back-off).
-- KEYS[1] lock hash
-- Returns 1 when something was held, else 0.
-- @include kinds

local wrong = kind_error(KEYS[1], false)
if wrong then
    return wrong
end
return redis.call('del', KEYS[1])
