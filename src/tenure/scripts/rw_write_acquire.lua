-- Take (or re-enter) the write hold of a read-write lock.
-- KEYS[1] lock hash   ARGV[1] lease ms   ARGV[2] writer field   ARGV[3] owner (reader field)
-- KEYS[2] wake queue, ARGV[4] the caller's client uuid (optional, together; ARGV[4] '' for
-- none when ARGV[5] is sent): a waiter listening on its client channel, whose client a
-- refusal registers (see _rw_wake.lua)
-- ARGV[5] '1' for a retry within a wait by an owner that holds nothing here, neither write
-- nor read holds (optional): its first attempt made the kind and re-entry checks, so a
-- held lock costs the PTTL alone, as a retry of lock_acquire.lua does
-- ARGV[6] '1' when the caller's client records a write hold here (a re-entry expected;
-- optional, with ARGV[4] and ARGV[5] sent, '' for none): granted only on top of the write
-- hold the server still has
-- ARGV[7] '1' when the caller's client records read holds of the owner here and no write
-- hold (an upgrade; optional, with ARGV[4] to ARGV[6] sent): refused ('upgrade') while the
-- server still has them; with them gone, granting (or waiting) would hide their loss
-- Granted when nobody holds the lock, or on re-entry by the writer (which adds the lease to
-- the remaining time, as Redisson does). Returns nil when acquired, 'upgrade' when the
-- caller holds read holds only (it would wait on itself forever), 'lost' when a re-entry
-- was expected and the caller has no write hold, or its read holds were expected and it has
-- none (lost: nothing is granted; lock_acquire.lua says why), 'lost:write' for a re-entry
-- whose write hold is gone while the owner's reader field is still there (its read holds,
-- taken under the write hold, are intact: not to be reported lost), else the lock's PTTL.
-- A free lock (PTTL -2: no key, so no kind to check) is granted before the fragments below
-- are included: every uncontended grant runs PTTL, HSET and PEXPIRE and defines no function
-- (each local function is made anew on every run of a script). A first attempt on a held
-- lock runs PTTL and one HMGET (then registers its client when it waits).

local ttl = redis.call('pttl', KEYS[1])
if ttl == -2 then
    if ARGV[6] == '1' or ARGV[7] == '1' then
        return 'lost'
    end
    redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
-- @include kinds
-- @include wake_register

if ARGV[5] == '1' then
    if ARGV[4] ~= '' then
        register(KEYS[2], ARGV[4])
    end
    return ttl
end

-- One HMGET (the mode, the writer's and the owner's reader field) answers the kind checks
-- and the re-entry and upgrade checks at once, as lock_count in _kinds.lua: a key of
-- another type fails it; the key exists (its PTTL was not -2, and time is frozen in a
-- script), so a hash with no mode is a Lock-family hash.
local found = redis.pcall('hmget', KEYS[1], 'mode', ARGV[2], ARGV[3])
if found['err'] then
    return type_error(KEYS[1], 'hash')
end
local mode = found[1]
if not mode then
    return kind_reply(KEYS[1], 'a Lock, FairLock or FencedLock, not a ReadWriteLock')
end
if mode == 'write' and found[2] then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    if ttl >= 0 then -- the PTTL above: nothing since changed the hash's expiry
        redis.call('pexpire', KEYS[1], ttl + tonumber(ARGV[1]))
    end
    return nil
end
if ARGV[6] == '1' and found[3] then
    return 'lost:write'
end
if ARGV[6] == '1' or (ARGV[7] == '1' and not found[3]) then
    return 'lost'
end
if mode == 'read' and found[3] then
    return 'upgrade'
end
if ARGV[4] and ARGV[4] ~= '' then
    register(KEYS[2], ARGV[4])
end
return ttl
