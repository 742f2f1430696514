-- Add time to every read hold of the caller on a read-write lock: each hold's timeout key
-- gets PTTL + the added time, and the hash lives at least as long as the longest of them.
-- KEYS[1] lock hash   KEYS[2..] the caller's read-timeout keys 1..n (n: the holds this
-- client records for it; keys beyond the server's count do not exist and are skipped)
-- ARGV[1] owner (reader field)   ARGV[2] ms to add   ARGV[3] longest lease ms
-- Returns nil when the owner holds no live read hold, else the newest hold's new remaining
-- lease in ms.
-- @include kinds

local wrong = kind_error(KEYS[1], true)
if wrong then
    return wrong
end

if not tonumber(redis.call('hget', KEYS[1], ARGV[1])) then
    return nil
end
local add, cap = tonumber(ARGV[2]), tonumber(ARGV[3])
local newest = nil
local longest = -2
for i = 2, #KEYS do
    local pttl = redis.call('pttl', KEYS[i])
    if pttl > 0 then
        local ttl = math.min(pttl + add, cap)
        redis.call('pexpire', KEYS[i], ttl)
        newest = ttl
        if ttl > longest then
            longest = ttl
        end
    end
end
if not newest then
    return nil
end
local pttl = redis.call('pttl', KEYS[1])
if pttl >= 0 and pttl < longest then
    redis.call('pexpire', KEYS[1], longest)
end
return newest
