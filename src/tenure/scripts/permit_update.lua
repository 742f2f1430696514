-- Give permit ARGV[1] a new lease of ARGV[2] ms from now.
-- KEYS[1] count  KEYS[2] channel  KEYS[3] permit ZSET   ARGV[1] permit id   ARGV[2] lease ms
-- Returns 1 when updated, 0 when the permit is unknown or expired.
-- A lease moved earlier publishes the count (0 when none is free) when that permit's end
-- would free one (count >= 0): waiters refused earlier sleep to the earliest permit end
-- they saw, and must look again (docs/wire.md, the semaphore channel).
-- @include server_time
-- @include permits
local now = now_ms()
reclaim(now)
local id = raw_id(ARGV[1])
local before = redis.call('zscore', KEYS[3], id)
if before == false then
    return 0
end
local after = now + tonumber(ARGV[2])
redis.call('zadd', KEYS[3], after, id)
if after < tonumber(before) then
    local count = tonumber(redis.call('get', KEYS[1]) or '0')
    if count >= 0 then
        redis.call('publish', KEYS[2], count)
    end
end
return 1
