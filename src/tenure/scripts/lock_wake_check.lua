-- The back-up of a targeted unlock (tenure's addition, docs/wire.md): the one client an
-- unlock woke alone may not act on it (paused, closing), and the other clients' waiters
-- would sleep with the lock free until its old lease end. The releasing client runs this a
-- moment later: if the lock is still free, it wakes the next client in the queue (the one
-- woken was moved to its back), or every listener of the lock's channel (see _wake.lua).
-- KEYS[1] lock hash   KEYS[2] channel   KEYS[3] wake queue
-- ARGV[1] unlock message
-- Returns 0 when the lock is held (its release will wake someone), else 1.
-- On a ReadWriteLock's queue the member `readers` (_rw_wake.lua) is dropped as a client
-- nobody listens for, not sent to the lock's channel: why that leaves no reader waiting is
-- in lock_wake.lua.
-- @include wake_register
-- @include wake

if redis.call('exists', KEYS[1]) == 1 then
    return 0
end
wake_one(KEYS[3], KEYS[2], ARGV[1])
return 1
