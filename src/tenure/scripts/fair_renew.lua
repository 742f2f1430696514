-- Watchdog: re-apply the lease to many fair-lock holds in one call, moving each lock's
-- waiters' deadlines with its expiry (see fair_acquire.lua).
-- Batch layout (see _renew_batch.lua): ARGV[1] lease ms, then per hold its owner field and
-- its key count (2); KEYS: per hold its lock hash, then its deadline ZSET.
-- Returns a list: 1 for a hold still present (lease renewed), 0 for a hold that is gone.
-- @include fair_shift
-- @include renew_batch
-- @include kinds

local lease = tonumber(ARGV[1])
return renew_batch(function(hold, field)
    -- a key of another kind (a read-write lock's hash, any other type; a wrong ZSET) is not this hold
    if kind_error(hold[1], false) or type_error(hold[2], 'zset')
            or redis.call('hexists', hold[1], field) == 0 then
        return false
    end
    local pttl = redis.call('pttl', hold[1])
    redis.call('pexpire', hold[1], lease)
    if pttl >= 0 then
        shift(hold[2], lease - pttl)
    end
    return true
end)
