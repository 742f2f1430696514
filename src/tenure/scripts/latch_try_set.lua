-- Set a CountDownLatch's count only if it is not set; publish "count set".
-- KEYS[1] count   ARGV[1] count  ARGV[2] channel (always braced: not a key, see keys.py)
-- ARGV[3] the "count set" message
-- Returns 1 when set, 0 when a count already existed.
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('set', KEYS[1], ARGV[1])
    redis.call('publish', ARGV[2], ARGV[3])
    return 1
end
return 0
