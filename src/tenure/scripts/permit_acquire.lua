-- Take one permit of a PermitExpirableSemaphore under the id ARGV[1], expired permits first
-- returned to the count.
-- KEYS[1] count  KEYS[2] channel  KEYS[3] permit ZSET   ARGV[1] permit id (32 hex)
-- ARGV[2] lease ms
-- Returns nil when taken, else ms until the earliest permit expires (-1: no permit out, -2:
-- none out and the count was never set).
-- @include server_time
-- @include permits
local now = now_ms()
reclaim(now)
local value = redis.call('get', KEYS[1])
if value ~= false and tonumber(value) >= 1 then
    redis.call('decr', KEYS[1])
    redis.call('zadd', KEYS[3], now + tonumber(ARGV[2]), raw_id(ARGV[1]))
    return nil
end
local first = redis.call('zrange', KEYS[3], 0, 0, 'WITHSCORES')
if first[1] ~= nil then
    return math.max(0, tonumber(first[2]) - now)
end
if value == false then
    return -2
end
return -1
