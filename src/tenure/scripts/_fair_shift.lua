-- shift(zset, ms): move every waiter's deadline in a fair lock's deadline ZSET by ms, as the
-- lock's expiry just moved (see fair_acquire.lua).
local function shift(zset, ms)
    if ms ~= 0 then
        for _, waiter in ipairs(redis.call('zrange', zset, 0, -1)) do
            redis.call('zincrby', zset, ms, waiter)
        end
    end
end
