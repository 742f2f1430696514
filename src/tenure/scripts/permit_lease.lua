-- Ms until permit ARGV[1] expires; -2 when it is unknown or expired, -1 for a permit without
-- expiry (Redisson's no-lease score). Changes nothing.
-- KEYS[1] permit ZSET   ARGV[1] permit id (32 hex)
-- @include server_time
-- @include permits
local score = redis.call('zscore', KEYS[1], raw_id(ARGV[1]))
if score == false then
    return -2
end
if tonumber(score) >= 922337203685477 then
    return -1
end
local left = tonumber(score) - now_ms()
if left <= 0 then
    return -2
end
return left
