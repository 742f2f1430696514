-- The number of available permits (0 for a count never set), expired permits returned first.
-- KEYS[1] count  KEYS[2] channel  [KEYS[3] permit ZSET]
-- @include server_time
-- @include permits
reclaim(clock())
return tonumber(redis.call('get', KEYS[1]) or '0')
