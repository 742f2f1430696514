-- Acquire (or re-enter) a reentrant lock.
-- KEYS[1] lock hash   ARGV[1] lease ms   ARGV[2] owner field
-- ARGV[3] '1' for a retry within a wait by an owner that holds nothing here (optional)
-- Returns nil when acquired, else the holder's remaining lease in ms (-1: no expiry).
-- Calls are counted, since every client's waiter retries on each unlock (Redisson's channel
-- reaches them all): PTTL first, so a free lock is granted with no read of the hash. A held
-- one costs one HMGET more (lock_count: the kind checks and re-entry at once); a retry costs
-- the PTTL alone, as its owner cannot re-enter and its first attempt already checked the kind.
-- @include kinds

local ttl = redis.call('pttl', KEYS[1])
if ttl ~= -2 then
    if ARGV[3] == '1' then
        return ttl
    end
    local count, wrong = lock_count(KEYS[1], ARGV[2])
    if wrong then
        return wrong
    end
    if not count then
        return ttl
    end
end
redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[1])
return nil
