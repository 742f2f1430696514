-- Release one write hold of a read-write lock.
-- KEYS[1] lock hash   KEYS[2] channel   KEYS[3..] the caller's read-timeout keys 1..n
-- ARGV[1] unlock message (wake all)   ARGV[2] lease ms re-applied to the remaining holds
-- ARGV[3] writer field   ARGV[4] owner (reader field)
-- ARGV[5..] the declaration of the caller's reader field: 1, owner, n (see _rw_readers.lua)
-- When the last write hold goes while the caller still holds read holds, the lock stays in
-- read mode (downgrade), lives as long as those holds, and waiting readers are woken.
-- Returns nil when the caller holds no write hold, the stale-declaration reply when n is
-- below the owner's read count (nothing changed), 0 when write holds remain, 1 when the caller's
-- last write hold is gone.
-- The PUBLISH (which an ACL can refuse) comes before the writes it announces: a refused
-- one changes nothing.
-- @include rw_readers
-- @include kinds

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
    redis.call('publish', KEYS[2], ARGV[1])
    redis.call('del', KEYS[1])
    return 1
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
