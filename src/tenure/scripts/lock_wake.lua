-- Pass on a targeted wake-up of a Lock that reached a client with no waiter left to use it
-- (its waiters left, or the one woken was cancelled): wake another (see _wake.lua).
-- KEYS[1] lock hash   KEYS[2] channel   KEYS[3] wake queue
-- ARGV[1] unlock message   ARGV[2] the passing client's uuid
-- Returns 0 when the lock is held (its release will wake someone), else 1.
-- The passing client leaves the wake queue first: it has no waiter (a new one registers it
-- again), and two idle clients, whose client channels linger, never pass a wake-up back and
-- forth.
-- @include wake_register
-- @include wake

redis.call('zrem', KEYS[3], ARGV[2])
if redis.call('exists', KEYS[1]) == 1 then
    return 0
end
wake_one(KEYS[3], KEYS[2], ARGV[1], ARGV[2])
return 1
