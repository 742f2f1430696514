-- Release one read hold of a read-write lock.
-- KEYS[1] lock hash   KEYS[2] channel   KEYS[3..] every reader's read-timeout keys
-- KEYS[#KEYS] wake queue (see _rw_wake.lua)
-- ARGV[1] unlock message   ARGV[2] owner (reader field, <client uuid>:<n>)
-- ARGV[3..] the declaration of every reader field and its count (see _rw_readers.lua)
-- ARGV[4 + 2 * ARGV[3]] '1' when the releaser's client listens on the lock's channel
-- without waiting (_wake.lua's `idle`), else '0'
-- ARGV[5 + 2 * ARGV[3]] lease ms re-applied to the owner's newest remaining read hold
-- (optional): a release that leaves the owner holds re-applies their lease, as
-- lock_release.lua and rw_write_release.lua do, so that the lock lives at least as long as
-- the client counts its remaining hold valid (from this release's sending). Without it, a
-- remaining hold taken before (with the same lease) ends sooner than the client counts:
-- a writer could be granted while the reader's client still counts its hold valid (found
-- by the simulator, tests/test_sim.py).
-- In read mode the hash then lives as long as the longest remaining read hold (so a dead
-- reader's hold, whose timeout key expired, no longer counts); with none left it is deleted
-- and the unlock wakes one registered client, or every listener (rw_wake in
-- _rw_wake.lua). Returns nil when the owner holds no read hold, the stale-declaration reply
-- when the declaration does not match the hash (nothing changed), 0 when the lock is still
-- held, and when it was freed lock_release.lua's replies (rw_freed in _rw_wake.lua).
-- Everything is decided before the first write, and the PUBLISH (which an ACL can refuse)
-- is the first write: a refused one changes nothing.
--
-- One HMGET (the mode and the owner's count, as lock_count in _kinds.lua: a key of another
-- type fails it, a Lock-family hash has no mode) answers the kind and owner checks of a
-- ReadWriteLock hash; every other key goes to the full checks below.
-- Every uncontended release ends before the fragments below it, as lock_release.lua's does:
-- the owner's one hold in a read-mode hash holding nothing else (HLEN 2: mode and the owner),
-- declared alone (1, owner, n >= 1: its hold 1 is KEYS[3]; with no other reader, nothing is
-- stale and no hold keeps the lock), no wake queue (EXISTS: the server deletes an emptied
-- ZSET) and nobody but the idle releaser heard the unlock. It runs HMGET, HLEN, EXISTS,
-- PUBLISH and DEL (the hold's timeout key and the hash at once) and defines no function
-- (each local function is made anew on every run of a script).

local mode, free, heard
local found = redis.pcall('hmget', KEYS[1], 'mode', ARGV[2])
if not found['err'] and found[1] then -- a ReadWriteLock hash
    if not found[2] then
        return nil -- the owner holds no read hold
    end
    mode = found[1]
    if mode == 'read' and found[2] == '1' and ARGV[3] == '1' and ARGV[4] == ARGV[2]
            and (tonumber(ARGV[5]) or 0) >= 1 and redis.call('hlen', KEYS[1]) == 2 then
        free = true
        if redis.call('exists', KEYS[#KEYS]) == 0 then
            heard = redis.call('publish', KEYS[2], ARGV[1])
            if heard <= (tonumber(ARGV[6]) or 0) then
                redis.call('del', KEYS[3], KEYS[1])
                return 1 + heard
            end
        end
    end
end
-- @include rw_readers
-- @include kinds
-- @include wake_register
-- @include wake
-- @include rw_wake

if heard then -- the queue is empty and the unlock reached someone: the lock is contended
    put_back(KEYS[#KEYS], ARGV[2])
    redis.call('del', KEYS[3], KEYS[1])
    return 1 + heard
end
if free then
    local woken, unsure
    woken, heard, unsure = rw_wake(KEYS[#KEYS], KEYS[2], ARGV[1], tonumber(ARGV[6]), ARGV[2])
    redis.call('del', KEYS[3], KEYS[1])
    return rw_freed(woken, heard, unsure, ARGV[2])
end
if not mode then -- no key, or a key of another kind: the kind checks name it
    local wrong = kind_error(KEYS[1], true)
    if wrong then
        return wrong
    end
    mode = redis.call('hget', KEYS[1], 'mode')
    if mode == false or redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
        return nil
    end
end
local readers, stale = declared_readers(KEYS[1], 3, 3, true, 0)
if not readers then
    return stale
end
local own = readers[ARGV[2]]
local count = own[2] - 1
local released = KEYS[own[1] + own[2] - 1] -- the newest hold's timeout key

local reapply = tonumber(ARGV[5 + 2 * tonumber(ARGV[3])])
if count == 0 then
    reapply = nil
end

local function drop_hold()
    if count == 0 then
        redis.call('hdel', KEYS[1], ARGV[2])
    else
        redis.call('hincrby', KEYS[1], ARGV[2], -1)
    end
    redis.call('del', released)
    if reapply then -- the newest remaining hold's key, set anew if it ran out meanwhile
        redis.call('set', KEYS[own[1] + count - 1], 1, 'px', reapply)
    end
end

if mode == 'write' then
    drop_hold()
    if reapply then -- the write lock keeps its own lease; the read hold lives as long
        local pttl = redis.call('pttl', KEYS[1])
        if pttl >= 0 and pttl < reapply then
            redis.call('pexpire', KEYS[1], reapply)
        end
    end
    return 0
end
local longest = -2
for field, reader in pairs(readers) do
    local holds = reader[2]
    if field == ARGV[2] then
        holds = count
    end
    for n = 1, holds do
        local pttl = redis.call('pttl', KEYS[reader[1] + n - 1])
        if pttl > longest then
            longest = pttl
        end
    end
end
if reapply and reapply > longest then
    longest = reapply
end
if longest > 0 then
    -- The expiry may move earlier (the released hold lived longest). Waiters refused
    -- before saw the old PTTL and re-check at its end: told nothing, they would sleep on
    -- with the lock free once the remaining holds end by expiry (a paused client, a
    -- lease_time not renewed). So a shortening beyond the drift allowance a waiter's clock
    -- has anyway (1 % + 2 ms of the old PTTL, tenure.core.clock) publishes the write
    -- unlock's '1' on the lock's channel: every waiter tries again at once and sees the new
    -- PTTL (a Redisson waiter tries again too, as after any unlock; docs/wire.md). The
    -- PUBLISH before the writes.
    local before = redis.call('pttl', KEYS[1])
    if before == -1 or before - longest > before / 100 + 2 then
        redis.call('publish', KEYS[2], '1')
    end
    drop_hold()
    redis.call('pexpire', KEYS[1], longest)
    return 0
end
local idle = tonumber(ARGV[4 + 2 * tonumber(ARGV[3])])
local woken, heard, unsure = rw_wake(KEYS[#KEYS], KEYS[2], ARGV[1], idle, ARGV[2])
redis.call('del', released)
redis.call('del', KEYS[1])
return rw_freed(woken, heard, unsure, ARGV[2])
