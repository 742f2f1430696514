-- Watchdog: re-apply the lease to many holds in one call.
-- KEYS[i] lock hash i   ARGV[1] lease ms   ARGV[i + 1] owner field of hold i
-- Returns a list: 1 for a hold still present (lease renewed), 0 for a hold that is gone.
local renewed = {}
for i, key in ipairs(KEYS) do
    if redis.call('hexists', key, ARGV[i + 1]) == 1 then
        redis.call('pexpire', key, ARGV[1])
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
