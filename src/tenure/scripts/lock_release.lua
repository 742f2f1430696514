-- Release one hold of a reentrant lock.
-- KEYS[1] lock hash   KEYS[2] wake queue
-- ARGV[1] unlock message   ARGV[2] lease ms re-applied to the remaining holds
-- ARGV[3] owner field, <client uuid>:<number> (keys.owner_field): it names the releaser's
-- client (client_of in _wake.lua)
-- ARGV[4] '1' when the releaser's client listens on the lock's channel without waiting (its
-- subscription lingers): that listener is no one to wake. '2' when it has no waiter there
-- but its listener counts (the end of its lingering, when its UNSUBSCRIBE may overtake the
-- release): the unlock still never goes to its client alone (which could only pass it on,
-- a round trip later). Optional ('0' when absent); a guarded release (scripts.guarded(),
-- two more ARGV) always sends it
-- Returns nil when the owner holds nothing, 0 when holds remain, and when the lock was freed:
-- -1 when the unlock woke the releaser's own client alone, -2 when it woke one other client
-- alone, else 1 + the number of listeners the channel message reached (the releaser need not
-- barge ahead of a client it woke); that number as a string when the count of the lock's
-- channel could not be true (_wake.lua, UNSURE_COUNT): the releaser then settles it.
-- One HMGET answers the kind checks and the owner's count (as lock_count in _kinds.lua).
-- The PUBLISH (which an ACL can refuse) comes before the DEL: a refused one changes nothing,
-- and as the script is atomic nobody is woken before the key is gone.
-- A release that woke someone (the lock is contended) also puts the releaser's client at the
-- back of the wake queue: a releaser that waits again at once (within its yield to the client
-- it woke, before any attempt of its own registers it) is then a registered client, and the
-- next unlock still goes to one client instead of the channel. Registered means "may wait":
-- a client whose own channel nobody listens on (it has no waiter) is dropped by the next
-- unlock, and never counted among the live ones.
--
-- Every uncontended release ends before the fragments below it: a Lock-family hash, no wake
-- queue (no client registered: EXISTS, as the server deletes an emptied ZSET) and nobody
-- but the idle releaser heard the unlock. It runs HMGET, EXISTS, PUBLISH and DEL and
-- defines no function (each local function is made anew on every run of a script).

local found = redis.pcall('hmget', KEYS[1], 'mode', ARGV[3])
local channel, heard
if not found['err'] and not found[1] then
    local count = tonumber(found[2])
    if not count then
        return nil
    end
    -- The lock's channel, keys.lock_channel(): built here, one word less for every client
    -- to send.
    channel = 'redisson_lock__channel:' .. (string.find(KEYS[1], '{', 1, true) and KEYS[1] or '{' .. KEYS[1] .. '}')
    if count > 1 then
        local before = redis.call('pttl', KEYS[1])
        redis.call('hincrby', KEYS[1], ARGV[3], -1)
        redis.call('pexpire', KEYS[1], ARGV[2])
        if before == -1 or before - tonumber(ARGV[2]) > before / 100 + 2 then
            -- The hold left has a shorter lease than the one released: waiters refused
            -- with the old end are told the new one (as a re-entry does, lock_acquire.lua).
            redis.pcall('publish', channel, '-' .. ARGV[2])
        end
        return 0
    end
    if redis.call('exists', KEYS[2]) == 0 then
        heard = redis.call('publish', channel, ARGV[1])
        if heard <= (ARGV[4] == '1' and 1 or 0) then
            redis.call('del', KEYS[1])
            return 1 + heard
        end
    end
end
-- @include kinds
-- @include wake_register
-- @include wake

if not channel then -- a key of another kind: the kind checks name it
    local _, wrong = lock_count(KEYS[1], ARGV[3])
    return wrong
end
if heard then -- the queue is empty and the unlock reached someone: the lock is contended
    put_back(KEYS[2], ARGV[3])
    redis.call('del', KEYS[1])
    return 1 + heard
end
local woken, unsure
local idle, own = ARGV[4] == '1' and 1 or 0, ARGV[4] == '2' and client_of(ARGV[3])
woken, heard, unsure = wake_one(KEYS[2], channel, ARGV[1], own, idle, ARGV[3])
redis.call('del', KEYS[1])
if woken then
    return woken == client_of(ARGV[3]) and -1 or -2
end
if unsure then
    return tostring(1 + heard)
end
return 1 + heard
