-- The back-up of a targeted unlock (tenure's addition, docs/wire.md): the one client an
-- unlock woke alone may not act on it (paused, closing), and the other clients' waiters
-- would sleep with the lock free until its old lease end. The releasing client runs this a
-- moment later: if the lock is still free, it wakes the next client in the queue (the one
-- woken was moved to its back), or every listener of the lock's channel (see _wake.lua).
-- KEYS[1] lock hash   KEYS[2] channel   KEYS[3] wake queue
-- ARGV[1] unlock message
-- Returns 0 when the lock is held (its release will wake someone), else 1.
-- Held, with clients still queued: they were refused before the unlock, by a lease that may
-- end later than the one the woken client took since; they hear no unlock and would sleep
-- to that older end if the new holder never releases. So the lock's channel is told the
-- new lease end as a watchdog renewal tells it ('-<ms>', tenure.keys.RENEWED_PREFIX; a
-- number Redisson's listeners ignore): waiters re-check at that end.
-- On a ReadWriteLock's queue the member `readers` (_rw_wake.lua) is dropped as a client
-- nobody listens for, not sent to the lock's channel: why that leaves no reader waiting is
-- in lock_wake.lua.
-- @include wake_register
-- @include wake

local ttl = redis.call('pttl', KEYS[1])
if ttl ~= -2 then
    if ttl > 0 and redis.call('exists', KEYS[3]) == 1 then
        redis.pcall('publish', KEYS[2], '-' .. ttl)  -- refused by an ACL: waiters re-check later
    end
    return 0
end
wake_one(KEYS[3], KEYS[2], ARGV[1])
return 1
