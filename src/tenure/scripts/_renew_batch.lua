-- A watchdog batch (tenure.core.watchdog): ARGV[1] the lease ms, then per hold its owner field
-- and how many KEYS it has; KEYS holds those keys hold after hold, each hold's lock hash first.
-- renew_batch(renew) calls renew(keys, field) for each hold, keys being that hold's KEYS in
-- order, and returns what the watchdog reads: per hold 1 when renew returned true (renewed),
-- 0 when it returned false (the hold is gone).
local function renew_batch(renew)
    local renewed = {}
    local at = 1
    for i = 2, #ARGV, 2 do
        local hold = {}
        for j = 1, tonumber(ARGV[i + 1]) do
            hold[j] = KEYS[at]
            at = at + 1
        end
        renewed[#renewed + 1] = renew(hold, ARGV[i]) and 1 or 0
    end
    return renewed
end
