-- A watchdog batch (tenure.core.watchdog): ARGV[1] the lease ms, then per hold its owner field,
-- how many KEYS it has and the channel its lock's waiters listen on ('' for none); KEYS holds
-- those keys hold after hold, each hold's lock hash first.
-- renew_batch(renew) calls renew(keys, field) for each hold, keys being that hold's KEYS in
-- order, and returns what the watchdog reads: per hold 1 when renew returned true (renewed),
-- 0 when it returned false (the hold is gone). Each channel of a renewed hold is told
-- '-<lease ms>' once per batch (tenure.keys.RENEWED_PREFIX): waiters then sleep on until
-- the new lease end instead of re-checking at the old one.
local function renew_batch(renew)
    local renewed = {}
    local told = {}
    local message = '-' .. ARGV[1]
    local at = 1
    for i = 2, #ARGV, 3 do
        local hold = {}
        for j = 1, tonumber(ARGV[i + 1]) do
            hold[j] = KEYS[at]
            at = at + 1
        end
        local ok = renew(hold, ARGV[i])
        local channel = ARGV[i + 2]
        if ok and channel ~= '' and not told[channel] then
            told[channel] = true
            redis.pcall('publish', channel, message)  -- refused by an ACL: the renewal stands
        end
        renewed[#renewed + 1] = ok and 1 or 0
    end
    return renewed
end
