-- Give permit ARGV[1] a new lease of ARGV[2] ms from now.
-- KEYS[1] count  KEYS[2] channel  KEYS[3] permit ZSET   ARGV[1] permit id   ARGV[2] lease ms
-- Returns 1 when updated, 0 when the permit is unknown or expired.
-- @include server_time
-- @include permits
local now = now_ms()
reclaim(now)
local id = raw_id(ARGV[1])
if redis.call('zscore', KEYS[3], id) == false then
    return 0
end
redis.call('zadd', KEYS[3], now + tonumber(ARGV[2]), id)
return 1
