-- Add time to the caller's write hold of a read-write lock (as lock_extend.lua): the
-- key's remaining lease becomes PTTL + the added time.
-- KEYS[1] lock hash   ARGV[1] writer field   ARGV[2] ms to add   ARGV[3] longest lease ms
-- Returns nil when the owner holds nothing (expired or taken), else the new remaining lease
-- in ms (capped at ARGV[3]); -1 when the key has no expiry (left as it is).
-- @include kinds

local wrong = kind_error(KEYS[1], true)
if wrong then
    return wrong
end

if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return nil
end
local pttl = redis.call('pttl', KEYS[1])
if pttl < 0 then
    return pttl
end
local ttl = math.min(pttl + tonumber(ARGV[2]), tonumber(ARGV[3]))
redis.call('pexpire', KEYS[1], ttl)
return ttl
