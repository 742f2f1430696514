-- Count a CountDownLatch down by one; at zero delete it and wake every waiter.
-- KEYS[1] count   ARGV[1] channel   ARGV[2] the "reached zero" message
-- Returns the new count (the key is gone at 0 or below).
local value = redis.call('decr', KEYS[1])
if value <= 0 then
    redis.call('del', KEYS[1])
end
if value == 0 then
    redis.call('publish', ARGV[1], ARGV[2])
end
return value
