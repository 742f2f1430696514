-- Watchdog: re-apply the lease to many leaderships in one call.
-- Batch layout (see _renew_batch.lua): ARGV[1] lease ms, then per hold its owner field, its
-- key count (1) and the election's channel; KEYS: per hold its leader hash.
-- Returns a list: 1 for a leadership still the owner's (renewed), 0 for one that is gone.
-- @include renew_batch
-- @include kinds

local lease = ARGV[1]
return renew_batch(function(hold, field)
    if type_error(hold[1], 'hash') or redis.call('hget', hold[1], 'owner') ~= field then
        return false
    end
    redis.call('pexpire', hold[1], lease)
    return true
end)
