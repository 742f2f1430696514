-- Pass on a targeted wake-up of a Lock that reached a client with no waiter left to use it
-- (its waiters left, or the one woken was cancelled): wake another (see _wake.lua).
-- KEYS[1] lock hash   KEYS[2] channel   KEYS[3] wake queue
-- ARGV[1] unlock message   ARGV[2] the passing client's uuid
-- Returns 0 when the lock is held (its release will wake someone), else 1.
-- The passing client leaves the wake queue first: it has no waiter (a new one registers it
-- again), and two idle clients, whose client channels linger, never pass a wake-up back and
-- forth.
-- On a ReadWriteLock's queue (WriteLockCore runs it too) wake_one takes the member
-- `readers` (_rw_wake.lua) for a client nobody listens for and drops it, instead of sending
-- the unlock to the lock's channel. Left so on purpose, decided with the simulator's RW
-- model (tests/test_sim.py: "reader left waiting" and "lost wake-up" checked; 3,582 runs
-- of this script and lock_wake_check.lua on RW queues in 20 seeds, 3 with the mark on a
-- free lock, none left a reader waiting). The mark is on a free lock only when the lock
-- was freed without rw_wake: a lease that ran out (every waiter, each on its own,
-- re-checks at that lease end: a ReadWriteLock's waiters share no re-check), or an
-- unlock that went to the lock's channel (a Java Redisson unlock, a forced release: every
-- reader heard it). A reader refused after that marks the queue again (rw_read_acquire.lua)
-- before the next holder's unlock, which then goes to the channel.
-- @include wake_register
-- @include wake

redis.call('zrem', KEYS[3], ARGV[2])
if redis.call('exists', KEYS[1]) == 1 then
    return 0
end
wake_one(KEYS[3], KEYS[2], ARGV[1], ARGV[2])
return 1
