-- Take every available permit at once.
-- KEYS[1] count  KEYS[2] channel  [KEYS[3] permit ZSET]
-- Returns how many were taken (0 when none were available).
-- @include server_time
-- @include permits
reclaim(clock())
local value = tonumber(redis.call('get', KEYS[1]) or '0')
if value <= 0 then
    return 0
end
redis.call('set', KEYS[1], 0)
return value
