-- The back-up of a targeted unlock (tenure's addition, docs/wire.md): the one client an
-- unlock woke alone may not act on it (paused, closing, or with no waiter left: its
-- socket is then read only when its janitor next looks, up to its channels' linger later),
-- and the other clients' waiters would sleep with the lock free. The releasing client runs
-- this a moment later: if the lock is still free, it sends the unlock to the lock's
-- channel, where every listener hears it. Not to the next client in the queue: the
-- releaser's own client is put behind the one woken (lock_release.lua), so with two
-- clients that one was the next again (a long mixed run of the simulator, seed 5: a
-- waiter of the releaser's client slept 0.24 s with the lock free). A look finds the
-- lock free only when the handoff failed, so the message to all is rare.
-- KEYS[1] lock hash   KEYS[2] channel   KEYS[3] wake queue
-- ARGV[1] unlock message
-- Returns 0 when the lock is held (its release will wake someone), else 1.
-- Held, with clients still queued: they were refused before the unlock, by a lease that may
-- end later than the one the woken client took since; they hear no unlock and would sleep
-- to that older end if the new holder never releases. So the lock's channel is told the
-- new lease end as a watchdog renewal tells it ('-<ms>', tenure.keys.RENEWED_PREFIX; a
-- number Redisson's listeners ignore): waiters re-check at that end (a ReadWriteLock's,
-- each at its own: tenure.core.parking.Parked.renewed).
-- On a ReadWriteLock's queue the unlock on the channel also reaches every waiting reader:
-- the member `readers` (_rw_wake.lua) has served and goes, as rw_wake drops it when it
-- sends to the channel (a reader refused again marks the queue again). Left, it made the
-- next release send to the channel too, waking every client instead of one. (On a Lock's
-- queue the ZREM finds nothing; a look finds the lock free only when a handoff failed.)

local ttl = redis.call('pttl', KEYS[1])
if ttl ~= -2 then
    if ttl > 0 and redis.call('exists', KEYS[3]) == 1 then
        redis.pcall('publish', KEYS[2], '-' .. ttl)  -- refused by an ACL: waiters re-check later
    end
    return 0
end
redis.call('publish', KEYS[2], ARGV[1])
redis.call('zrem', KEYS[3], 'readers')
return 1
