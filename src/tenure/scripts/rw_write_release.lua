-- Release one write hold of a read-write lock.
-- KEYS[1] lock hash   KEYS[2] channel   KEYS[3..] the caller's read-timeout keys 1..n
-- KEYS[#KEYS] wake queue (see _rw_wake.lua)
-- ARGV[1] unlock message (wake all)   ARGV[2] lease ms re-applied to the remaining holds
-- ARGV[3] writer field   ARGV[4] owner (reader field, <client uuid>:<n>)
-- ARGV[5..7] the declaration of the caller's reader field: 1, owner, n (see _rw_readers.lua)
-- ARGV[8] '1' when the releaser's client listens on the lock's channel without waiting (its
-- subscription lingers): that listener is no one to wake (_wake.lua's `idle`), else '0'
-- When the last write hold goes while the caller still holds read holds, the lock stays in
-- read mode (downgrade), lives as long as those holds, and every waiter is woken (waiting
-- readers may come in). When it goes with no read hold left the lock is free, and the
-- unlock wakes one registered client, or every listener (rw_wake in _rw_wake.lua).
-- Returns nil when the caller holds no write hold, the stale-declaration reply when n is
-- below the owner's read count (nothing changed), 0 when write holds remain, 1 after a
-- downgrade; when the lock was freed, lock_release.lua's replies (rw_freed in _rw_wake.lua):
-- -1 / -2 when the unlock woke the releaser's own / one other client alone, else 1 + the
-- listeners the channel message reached (a string when that count could not be true).
-- The PUBLISH (which an ACL can refuse) comes before the writes it announces: a refused
-- one changes nothing.
-- A release that leaves write holds sets the expiry to ARGV[2], which may shorten it (a
-- re-entry adds its lease to the time left, as Redisson's does). Waiters refused before
-- saw the old PTTL and re-check at its end: told nothing, they would sleep on with the
-- lock free once the remaining hold ends by expiry (a paused client, a lease_time not
-- renewed). So a shortening beyond the drift allowance a waiter's clock has anyway (1 % +
-- 2 ms of the old PTTL, tenure.core.clock) publishes ARGV[1] on the lock's channel: every
-- waiter tries again at once and sees the new PTTL (a Redisson waiter tries again too, as
-- after any write unlock; docs/wire.md). rw_read_release.lua does the same.
--
-- One HMGET (the mode, the writer's count and the caller's read count, as lock_count in
-- _kinds.lua: a key of another type fails it, a Lock-family hash has no mode) answers the
-- checks of a hash in write mode; every other key goes to the full checks below.
-- Every uncontended release ends before the fragments below it, as lock_release.lua's does:
-- the writer's last hold in a hash holding only it (HLEN 2: mode and the writer field), no
-- wake queue (EXISTS: the server deletes an emptied ZSET, so no client is registered and no
-- reader marked it) and nobody but the idle releaser heard the unlock. It runs HMGET, HLEN,
-- EXISTS, PUBLISH and DEL and defines no function (each local function is made anew on
-- every run of a script).

local found, hold, free, heard
if ARGV[5] == '1' and ARGV[6] == ARGV[4] then -- the caller's declaration, as always sent
    found = redis.pcall('hmget', KEYS[1], 'mode', ARGV[3], ARGV[4])
    if not found['err'] and found[1] == 'write' then
        hold = tonumber(found[2])
        if not hold then
            return nil -- not the writer
        end
        if (tonumber(found[3]) or 0) > tonumber(ARGV[7]) then
            hold = nil -- a stale declaration: declared_readers below builds the reply
        elseif hold > 1 then
            -- Shorter than the waiters saw (a re-entry added its lease): they try again
            local before = redis.call('pttl', KEYS[1])
            if before == -1 or before - tonumber(ARGV[2]) > before / 100 + 2 then
                redis.call('publish', KEYS[2], ARGV[1])
            end
            redis.call('hincrby', KEYS[1], ARGV[3], -1)
            redis.call('pexpire', KEYS[1], ARGV[2])
            return 0
        elseif redis.call('hlen', KEYS[1]) == 2 then -- only mode and the writer: free
            free = true
            if redis.call('exists', KEYS[#KEYS]) == 0 then
                heard = redis.call('publish', KEYS[2], ARGV[1])
                if heard <= (tonumber(ARGV[8]) or 0) then
                    redis.call('del', KEYS[1])
                    return 1 + heard
                end
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
    put_back(KEYS[#KEYS], ARGV[4])
    redis.call('del', KEYS[1])
    return 1 + heard
end
if free then
    local woken, unsure
    woken, heard, unsure = rw_wake(KEYS[#KEYS], KEYS[2], ARGV[1], tonumber(ARGV[8]), ARGV[4])
    redis.call('del', KEYS[1])
    return rw_freed(woken, heard, unsure, ARGV[4])
end
local readers
if hold then -- the writer's last hold, its read holds declared, read holds left: downgrade
    readers = {[ARGV[4]] = {3, tonumber(found[3]) or 0}}
else
    local wrong = kind_error(KEYS[1], true)
    if wrong then
        return wrong
    end
    if redis.call('hget', KEYS[1], 'mode') ~= 'write'
            or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
        return nil
    end
    local stale
    readers, stale = declared_readers(KEYS[1], 5, 3, false, 0)
    if not readers then
        return stale
    end
    if (tonumber(redis.call('hget', KEYS[1], ARGV[3])) or 0) > 1 then
        local before = redis.call('pttl', KEYS[1]) -- as above
        if before == -1 or before - tonumber(ARGV[2]) > before / 100 + 2 then
            redis.call('publish', KEYS[2], ARGV[1])
        end
        redis.call('hincrby', KEYS[1], ARGV[3], -1)
        redis.call('pexpire', KEYS[1], ARGV[2])
        return 0
    end
    if redis.call('hlen', KEYS[1]) == 2 then -- only mode and the writer: free
        local woken, unsure
        woken, heard, unsure = rw_wake(KEYS[#KEYS], KEYS[2], ARGV[1], tonumber(ARGV[8]), ARGV[4])
        redis.call('del', KEYS[1])
        return rw_freed(woken, heard, unsure, ARGV[4])
    end
end
local longest = redis.call('pttl', KEYS[1])
local own = readers[ARGV[4]]
for n = 1, own[2] do
    local pttl = redis.call('pttl', KEYS[own[1] + n - 1])
    if pttl > longest then
        longest = pttl
    end
end
redis.call('publish', KEYS[2], ARGV[1])
redis.call('hdel', KEYS[1], ARGV[3])
redis.call('hset', KEYS[1], 'mode', 'read')
if longest > 0 then
    redis.call('pexpire', KEYS[1], longest)
end
return 1
