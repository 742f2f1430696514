-- Watchdog: renew the read holds of many owners, each only its own holds.
-- Batch layout (see _renew_batch.lua): ARGV[1] lease ms, then per hold its reader owner
-- field, its key count (1 + c) and the lock's channel (told of the renewal); KEYS: per hold
-- its lock hash, then the owner's read-hold timeout keys 1..c, c being the read holds this
-- client records for the owner. An owner is one thread or task of one client, so the
-- server's count for its field is that c, except while a grant is on its way to the client's
-- table (its key was just set with a full lease) or after the hold was lost (keys beyond the
-- server's count do not exist, PEXPIRE skips them). The hash's expiry is only ever extended,
-- never shortened (other readers may hold longer leases).
-- Returns a list: 1 for an owner still holding read holds (renewed), 0 for one that is gone.
-- @include renew_batch
-- @include kinds

local lease = tonumber(ARGV[1])
return renew_batch(function(hold, owner)
    -- a key of another kind (a plain lock's hash, any other type) is not this hold
    if kind_error(hold[1], true) or not tonumber(redis.call('hget', hold[1], owner)) then
        return false
    end
    for i = 2, #hold do
        redis.call('pexpire', hold[i], lease)
    end
    local pttl = redis.call('pttl', hold[1])
    if pttl >= 0 and pttl < lease then
        redis.call('pexpire', hold[1], lease)
    end
    return true
end)
