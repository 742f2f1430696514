-- Store a value in a fenced resource unless a higher fencing token was already seen.
-- KEYS[1] resource HASH   ARGV[1] token field   ARGV[2] value field
-- ARGV[3] token (decimal)   ARGV[4] value
-- Returns 1 when stored, 0 when refused (the stored token is higher than ARGV[3]).
-- An equal token is accepted: one holder may write several times under one token.
local seen = redis.call('hget', KEYS[1], ARGV[1])
if seen and tonumber(seen) > tonumber(ARGV[3]) then
    return 0
end
redis.call('hset', KEYS[1], ARGV[1], ARGV[3], ARGV[2], ARGV[4])
return 1
