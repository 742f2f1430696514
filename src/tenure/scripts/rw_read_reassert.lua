-- Renewal pass: re-assert the lock hash's expiry for the read holds the watchdog does not
-- renew (taken with a lease_time, or past their max_hold). A Redisson reader's renewal SETS
-- the hash's expiry to its own watchdog lease (PEXPIRE, not an extension), which may cut it
-- below a tenure reader's lease; a Java reader that then stops without unlocking would let
-- the hash expire under that reader (docs/wire.md, "ReadWriteLock shared with Redisson").
-- Batch layout as rw_read_renew.lua's (_renew_batch.lua): ARGV[1] (unused), then per hold
-- its reader owner field, its key count (1 + c) and a channel (unused: nothing is
-- published, no lease changes); KEYS: per hold its lock hash, then the owner's read-hold
-- timeout keys 1..c. The hash's expiry is extended to the furthest of the owner's timeout
-- keys, never shortened; the timeout keys are left alone (no hold's lease is lengthened).
-- Returns a list: 1 for an owner still holding read holds, 0 for one that is gone (lost).
-- @include kinds

local found = {}
local at = 1
for i = 2, #ARGV, 3 do
    local hash, owner, count = KEYS[at], ARGV[i], tonumber(ARGV[i + 1])
    -- a key of another kind (a plain lock's hash, any other type) is not this hold
    if kind_error(hash, true) or not tonumber(redis.call('hget', hash, owner)) then
        found[#found + 1] = 0
    else
        local furthest = -1
        for j = at + 1, at + count - 1 do
            local left = redis.call('pttl', KEYS[j])
            if left > furthest then
                furthest = left
            end
        end
        local pttl = redis.call('pttl', hash)
        if pttl >= 0 and pttl < furthest then
            redis.call('pexpire', hash, furthest)
        end
        found[#found + 1] = 1
    end
    at = at + count
end
return found
