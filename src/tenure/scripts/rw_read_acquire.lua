-- Take (or re-enter) a read hold of a read-write lock.
-- KEYS[1] lock hash   KEYS[2] the caller's read-timeout prefix (hold n: prefix .. ':' .. n)
-- ARGV[1] lease ms   ARGV[2] owner (reader field)   ARGV[3] the owner's writer field
-- Granted when nobody holds the lock, when it is in read mode, or when the caller holds
-- the write lock. Each read hold gets its own timeout key; the hash lives at least as long
-- as the longest hold. Returns nil when acquired, else the lock's PTTL in ms.
local lease = tonumber(ARGV[1])
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return redis.call('pttl', KEYS[1])
end
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'read')
end
local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('set', KEYS[2] .. ':' .. n, 1, 'px', lease)
local pttl = redis.call('pttl', KEYS[1])
if mode == false or (pttl >= 0 and pttl < lease) then
    redis.call('pexpire', KEYS[1], lease)
end
return nil
