-- Take (or re-enter) a read hold of a read-write lock.
-- KEYS[1] lock hash   KEYS[2..] the caller's read-timeout keys 1..n (see _rw_readers.lua)
-- ARGV[1] lease ms   ARGV[2] owner (reader field)   ARGV[3] the owner's writer field
-- ARGV[4..] the declaration of the caller's reader field: 1, owner, n (n > its hold count)
-- ARGV[7] '1' for a caller waiting on the lock's channel (optional): a refusal then puts
-- READERS in the wake queue, the last KEYS (see _rw_wake.lua), so that the next unlock
-- wakes every client
-- ARGV[8] '1' when the caller's client records read holds of the owner here (a re-entry
-- expected; optional, with ARGV[7] sent, '' for none): granted only on top of the read
-- holds the server still has
-- ARGV[9] '1' when the caller's client records the owner's write hold here (optional, with
-- ARGV[7] and ARGV[8] sent, '' for none): a read under that write hold is granted only while
-- the server still has it (a read granted afresh would put the lock in read mode, letting
-- other readers in beside a body that still believes it holds the write side)
-- Granted when nobody holds the lock, when it is in read mode, or when the caller holds
-- the write lock. Each read hold gets its own timeout key; the hash lives at least as long
-- as the longest hold. Returns nil when acquired, the stale-declaration reply when n does not
-- reach the new hold (nothing changed), 'lost' when a re-entry was expected and the owner has
-- no read hold, or its write hold was expected and is gone (lost: nothing is granted;
-- lock_acquire.lua says why), 'lost:read' / 'lost:write' when both were expected and only
-- the owner's read holds / only its write hold are gone (the other side is intact, and is not
-- to be reported lost), else the lock's PTTL in ms.
-- A free lock (PTTL -2: no key, so no kind to check and no hold counted) is granted to a
-- caller declared alone (1, owner, n >= 1: its hold 1 is KEYS[2]) before the fragments below
-- are included: PTTL, SET, HSET and PEXPIRE, and no function defined (each local function is
-- made anew on every run of a script). A refusal (another writer holds) runs PTTL and one
-- HMGET (then marks the queue when the reader waits).

local ttl = redis.call('pttl', KEYS[1]) -- the hash's; no write below changes its expiry
if ttl == -2 and (ARGV[8] == '1' or ARGV[9] == '1') then
    return 'lost'
end
if ttl == -2 and ARGV[4] == '1' and ARGV[5] == ARGV[2] and (tonumber(ARGV[6]) or 0) >= 1 then
    -- The SET (a command an ACL may refuse) first: a refused one leaves no mode behind.
    redis.call('set', KEYS[2], 1, 'px', ARGV[1])
    redis.call('hset', KEYS[1], ARGV[2], 1, 'mode', 'read')
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
-- @include rw_readers
-- @include kinds
-- @include wake_register

-- One HMGET (the mode and the owner's writer field) answers the kind checks and whether a
-- writer other than the owner holds, as lock_count in _kinds.lua: a key of another type
-- fails it, and a key that exists (PTTL not -2; time is frozen in a script) with no mode
-- is a Lock-family hash. A refusal changes nothing, so it needs no declaration check.
local found = redis.pcall('hmget', KEYS[1], 'mode', ARGV[3])
if found['err'] then
    return type_error(KEYS[1], 'hash')
end
local mode = found[1]
if not mode and ttl ~= -2 then
    return kind_reply(KEYS[1], 'a Lock, FairLock or FencedLock, not a ReadWriteLock')
end
if ARGV[9] == '1' and not found[2] then -- the owner's write hold is gone
    if ARGV[8] == '1' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
        return 'lost:write' -- its read holds are not (a failover that missed the write grant)
    end
    return 'lost'
end
if mode == 'write' and not found[2] then
    if ARGV[8] == '1' then -- another writer: the owner's read holds are gone
        return 'lost'
    end
    if ARGV[7] == '1' then
        register(KEYS[#KEYS], 'readers') -- READERS in _rw_wake.lua
    end
    return ttl
end

local readers, stale = declared_readers(KEYS[1], 4, 2, false, 1)
if not readers then
    return stale
end
local lease = tonumber(ARGV[1])
local own = readers[ARGV[2]]
if ARGV[8] == '1' and own[2] == 0 then
    if ARGV[9] == '1' then -- its write hold is there (checked above)
        return 'lost:read'
    end
    return 'lost'
end
-- The SET (a command an ACL may refuse) first: a refused one leaves no mode behind.
redis.call('set', KEYS[own[1] + own[2]], 1, 'px', lease) -- hold count + 1
redis.call('hincrby', KEYS[1], ARGV[2], 1)
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'read')
end
if mode == false or (ttl >= 0 and ttl < lease) then
    redis.call('pexpire', KEYS[1], lease)
end
return nil
