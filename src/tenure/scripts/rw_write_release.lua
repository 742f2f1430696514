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
-- @include rw_readers
-- @include kinds
-- @include wake_register
-- @include wake
-- @include rw_wake

local wrong = kind_error(KEYS[1], true)
if wrong then
    return wrong
end

if redis.call('hget', KEYS[1], 'mode') ~= 'write'
        or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local readers, stale = declared_readers(KEYS[1], 5, 3, false, 0)
if not readers then
    return stale
end
if (tonumber(redis.call('hget', KEYS[1], ARGV[3])) or 0) > 1 then
    redis.call('hincrby', KEYS[1], ARGV[3], -1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
if redis.call('hlen', KEYS[1]) == 2 then -- only mode and the writer: free
    local woken, heard, unsure = rw_wake(KEYS[#KEYS], KEYS[2], ARGV[1], tonumber(ARGV[8]), ARGV[4])
    redis.call('del', KEYS[1])
    return rw_freed(woken, heard, unsure, ARGV[4])
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
