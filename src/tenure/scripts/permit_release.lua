-- Give back permit ARGV[1] of a PermitExpirableSemaphore; publish the new count.
-- KEYS[1] count  KEYS[2] channel  KEYS[3] permit ZSET   ARGV[1] permit id (32 hex)
-- Returns 1 when released, 0 when the permit is unknown or expired (expired ones are
-- returned to the count first, so an expired permit is never given back twice).
-- @include server_time
-- @include permits
reclaim(now_ms())
if redis.call('zrem', KEYS[3], raw_id(ARGV[1])) == 0 then
    return 0
end
local value = redis.call('incrby', KEYS[1], 1)
redis.call('publish', KEYS[2], value)
return 1
