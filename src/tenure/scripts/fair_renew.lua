-- Watchdog: re-apply the lease to many fair-lock holds in one call, moving each lock's
-- waiters' deadlines with its expiry (see fair_acquire.lua).
-- KEYS[i] lock hash i   ARGV[1] lease ms   ARGV[i + 1] owner field of hold i
-- The deadline ZSET is redisson_lock_timeout:{<key>} (redisson_lock_timeout:<key> when the
-- key holds a '{'): the rule of tenure.keys.prefix_name, mirrored here.
-- Returns a list: 1 for a hold still present (lease renewed), 0 for a hold that is gone.
local lease = tonumber(ARGV[1])
local renewed = {}
for i, key in ipairs(KEYS) do
    if redis.call('hexists', key, ARGV[i + 1]) == 1 then
        local pttl = redis.call('pttl', key)
        redis.call('pexpire', key, lease)
        if pttl >= 0 and pttl ~= lease then
            local zset = 'redisson_lock_timeout:{' .. key .. '}'
            if string.find(key, '{', 1, true) then
                zset = 'redisson_lock_timeout:' .. key
            end
            for _, waiter in ipairs(redis.call('zrange', zset, 0, -1)) do
                redis.call('zincrby', zset, lease - pttl, waiter)
            end
        end
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
