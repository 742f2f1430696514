-- Set the permit count only if it was never set; publish it.
-- KEYS[1] count  KEYS[2] channel  [KEYS[3] permit ZSET]   ARGV[1] permits
-- Returns 1 when set, 0 when a count already existed.
-- @include server_time
-- @include permits
reclaim(clock())
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('set', KEYS[1], ARGV[1])
    redis.call('publish', KEYS[2], ARGV[1])
    return 1
end
return 0
