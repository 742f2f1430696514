-- Release one hold of a fair lock; once free, wake the queue head only.
-- KEYS[1] lock hash   KEYS[2] queue LIST   KEYS[3] deadline ZSET
-- ARGV[1] unlock message   ARGV[2] lease ms re-applied to the remaining holds
-- ARGV[3] owner field   ARGV[4] waiter channel prefix (channel = prefix .. owner)
-- Waiters' deadlines move with the lock's expiry (see fair_acquire.lua): once the lock is
-- free, the head has its allowance from now on to take it.
-- Returns nil when the owner holds nothing, 0 when holds remain, 1 when the lock was freed.
local function shift(ms)
    if ms ~= 0 then
        for _, waiter in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
            redis.call('zincrby', KEYS[3], ms, waiter)
        end
    end
end

if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local pttl = redis.call('pttl', KEYS[1])
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    if pttl >= 0 then
        shift(tonumber(ARGV[2]) - pttl)
    end
    return 0
end
redis.call('del', KEYS[1])
if pttl >= 0 then
    shift(-pttl)
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local head = redis.call('lindex', KEYS[2], 0)
while head do
    local deadline = redis.call('zscore', KEYS[3], head)
    if deadline and tonumber(deadline) > now then
        redis.call('publish', ARGV[4] .. head, ARGV[1])
        -- the one behind re-reads its wait: the head's deadline just moved ahead
        local next = redis.call('lindex', KEYS[2], 1)
        if next then
            redis.call('publish', ARGV[4] .. next, ARGV[1])
        end
        break
    end
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], head)
    head = redis.call('lindex', KEYS[2], 0)
end
return 1
