-- Delete a CountDownLatch and publish the "count set" message, as Redisson's deleteAsync
-- does; waiters wake on it, read the count again and find none (as at zero).
-- KEYS[1] count   ARGV[1] channel   ARGV[2] the "count set" message
-- Returns 1 when it existed.
if redis.call('del', KEYS[1]) == 1 then
    redis.call('publish', ARGV[1], ARGV[2])
    return 1
end
return 0
