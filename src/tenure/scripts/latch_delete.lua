-- Delete a CountDownLatch; its waiters wake (as at zero).
-- KEYS[1] count   ARGV[1] channel   ARGV[2] the "reached zero" message
-- Returns 1 when it existed.
if redis.call('del', KEYS[1]) == 1 then
    redis.call('publish', ARGV[1], ARGV[2])
    return 1
end
return 0
