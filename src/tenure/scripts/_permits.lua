-- Shared by the semaphore scripts. KEYS[1] the permit count (STRING), KEYS[2] the channel,
-- KEYS[3] (PermitExpirableSemaphore only) the ZSET of permits scored by expiry epoch-ms.
-- reclaim(now): return every permit whose lease ended by ``now`` to the count and publish the
-- new count when it is positive (as Redisson: permits set below those out leave it <= 0,
-- which serves nobody); nothing for a plain Semaphore (no KEYS[3]).
local function reclaim(now)
    if KEYS[3] == nil then
        return
    end
    local expired = redis.call('zremrangebyscore', KEYS[3], '-inf', now)
    if expired > 0 then
        local value = redis.call('incrby', KEYS[1], expired)
        if value > 0 then
            redis.call('publish', KEYS[2], value)
        end
    end
end

-- raw_id(hex): a permit id as the ZSET stores it, 16 raw bytes (callers see 32 hex digits).
local function raw_id(hex)
    return (string.gsub(hex, '..', function(byte)
        return string.char(tonumber(byte, 16))
    end))
end

-- clock(): the server's time in ms when the permits need it (KEYS[3] given), else 0.
local function clock()
    if KEYS[3] == nil then
        return 0
    end
    return now_ms()
end
