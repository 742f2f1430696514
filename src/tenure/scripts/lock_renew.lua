-- Watchdog: re-apply the lease to many holds in one call.
-- Batch layout (see _renew_batch.lua): ARGV[1] lease ms, then per hold its owner field, its
-- key count (1) and its waiters' channel (told of the renewal); KEYS: per hold its lock hash.
-- Returns a list: 1 for a hold still present (lease renewed), 0 for a hold that is gone.
-- @include renew_batch
-- @include kinds

local lease = ARGV[1]
return renew_batch(function(hold, field)
    -- a key of another type is not this hold (and would fail HEXISTS). A read-write lock's
    -- hash is fine: the write side renews through this script too, by its writer field.
    if type_error(hold[1], 'hash') or redis.call('hexists', hold[1], field) == 0 then
        return false
    end
    redis.call('pexpire', hold[1], lease)
    return true
end)
