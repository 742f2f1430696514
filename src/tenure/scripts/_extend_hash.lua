-- extend_hash(key, field, add, cap): add time to the caller's hold on lock hash `key` (its
-- field `field`): the key's remaining lease becomes PTTL + `add` ms, capped at `cap` ms.
-- Returns nil when the field is absent (expired or taken); the PTTL (negative) when the key
-- has no expiry (left as it is); else the new remaining lease in ms. Second value: the PTTL
-- before (for scripts that move other deadlines with it).
local function extend_hash(key, field, add, cap)
    if redis.call('hexists', key, field) == 0 then
        return nil
    end
    local pttl = redis.call('pttl', key)
    if pttl < 0 then
        return pttl, pttl
    end
    local ttl = math.min(pttl + tonumber(add), tonumber(cap))
    redis.call('pexpire', key, ttl)
    return ttl, pttl
end
