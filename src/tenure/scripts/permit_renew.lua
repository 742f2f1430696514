-- Watchdog: re-apply the lease to many permits taken without lease_time, in one call.
-- Batch layout (see _renew_batch.lua): ARGV[1] lease ms, then per permit its id (32 hex), its
-- key count (1) and '' (no channel: a permit's waiters do not wait for a lease end); KEYS:
-- per permit its semaphore's permit ZSET.
-- Returns a list: 1 for a permit still out (lease renewed), 0 for one gone or expired.
-- @include server_time
-- @include permits
-- @include renew_batch

local now = now_ms()
local lease = tonumber(ARGV[1])
return renew_batch(function(hold, field)
    local id = raw_id(field)
    local score = redis.call('zscore', hold[1], id)
    if score == false or tonumber(score) <= now then
        return false
    end
    redis.call('zadd', hold[1], now + lease, id)
    return true
end)
