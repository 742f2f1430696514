-- Take one hold of `owner` off a reentrant lock hash (Lock and SpinLock, Redisson's RLock
-- layout), the kind checks first (include _kinds.lua before this fragment).
-- release_hold(key, owner, lease_ms): nil when the owner holds nothing, 0 when holds remain
-- (the lease re-applied to them), the kind error when the key is another kind's, else
-- 'last': the owner's last hold, which the caller deletes (after its wake-up, if any).
local function release_hold(key, owner, lease_ms)
    local found, wrong = lock_count(key, owner)
    if wrong then
        return wrong
    end
    local count = tonumber(found)
    if not count then
        return nil
    end
    if count > 1 then
        redis.call('hincrby', key, owner, -1)
        redis.call('pexpire', key, lease_ms)
        return 0
    end
    return 'last'
end
