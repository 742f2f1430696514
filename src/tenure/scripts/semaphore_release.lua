-- Give permits back to a Semaphore and publish the new count.
-- KEYS[1] count  KEYS[2] channel   ARGV[1] permits
-- Returns the new count.
local value = redis.call('incrby', KEYS[1], ARGV[1])
redis.call('publish', KEYS[2], value)
return value
