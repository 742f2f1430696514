-- Delete a fair lock whoever holds it and wake the queue head.
-- KEYS[1] lock hash   KEYS[2] queue LIST   KEYS[3] deadline ZSET
-- ARGV[1] unlock message   ARGV[2] waiter channel prefix (channel = prefix .. owner)
-- Waiters' deadlines move with the lock's expiry (see fair_acquire.lua).
-- Returns 1 when something was held, else 0.
local pttl = redis.call('pttl', KEYS[1])
if redis.call('del', KEYS[1]) == 0 then
    return 0
end
if pttl > 0 then
    for _, waiter in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
        redis.call('zincrby', KEYS[3], -pttl, waiter)
    end
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local head = redis.call('lindex', KEYS[2], 0)
while head do
    local deadline = redis.call('zscore', KEYS[3], head)
    if deadline and tonumber(deadline) > now then
        redis.call('publish', ARGV[2] .. head, ARGV[1])
        -- the one behind re-reads its wait: the head's deadline just moved ahead
        local next = redis.call('lindex', KEYS[2], 1)
        if next then
            redis.call('publish', ARGV[2] .. next, ARGV[1])
        end
        break
    end
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], head)
    head = redis.call('lindex', KEYS[2], 0)
end
return 1
