-- Add permits (ARGV[1] may be negative; a count never set starts at 0). Publishes the new
-- count when permits were added and some are available.
-- KEYS[1] count  KEYS[2] channel  [KEYS[3] permit ZSET]   ARGV[1] delta
-- Returns the new count.
-- @include server_time
-- @include permits
reclaim(clock())
local value = redis.call('incrby', KEYS[1], ARGV[1])
if tonumber(ARGV[1]) > 0 and value > 0 then
    redis.call('publish', KEYS[2], value)
end
return value
