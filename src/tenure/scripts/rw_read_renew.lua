-- Watchdog: renew the read holds of many owners, each only its own holds.
-- KEYS[i] lock hash i   ARGV[1] lease ms   ARGV[i + 1] reader owner field of hold i
-- An owner's timeout keys are {<key>}:<owner>:rwlock_timeout:<n> (<key>:... when the key
-- holds a '{'): the rule of tenure.keys.suffix_name, mirrored here. The hash's expiry is only
-- ever extended, never shortened (other readers may hold longer leases).
-- Returns a list: 1 for an owner still holding read holds (renewed), 0 for one that is gone.
local lease = tonumber(ARGV[1])
local renewed = {}
for i, key in ipairs(KEYS) do
    local owner = ARGV[i + 1]
    local holds = tonumber(redis.call('hget', key, owner))
    if holds then
        local base = key
        if not string.find(key, '{', 1, true) then
            base = '{' .. key .. '}'
        end
        for n = 1, holds do
            redis.call('pexpire', base .. ':' .. owner .. ':rwlock_timeout:' .. n, lease)
        end
        local pttl = redis.call('pttl', key)
        if pttl >= 0 and pttl < lease then
            redis.call('pexpire', key, lease)
        end
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
