-- Set the number of permits and publish the count now available when some are (a count
-- <= 0 serves nobody; Redisson's listeners and clients expect positive counts only). With
-- a permit ZSET (PermitExpirableSemaphore) ARGV[1] is the total: permits out (unexpired)
-- count against it.
-- KEYS[1] count  KEYS[2] channel  [KEYS[3] permit ZSET]   ARGV[1] permits
-- Returns the count now available.
-- @include server_time
-- @include permits
reclaim(clock())
local available = tonumber(ARGV[1])
if KEYS[3] ~= nil then
    available = available - redis.call('zcard', KEYS[3])
end
redis.call('set', KEYS[1], available)
if available > 0 then
    redis.call('publish', KEYS[2], available)
end
return available
