-- Store a value in a fenced resource unless a higher fencing token was already seen.
-- KEYS[1] resource HASH   ARGV[1] token field   ARGV[2] value field
-- ARGV[3] token (decimal)   ARGV[4] value
-- Returns 1 when stored, 0 when refused (the stored token is higher than ARGV[3]).
-- An equal token is accepted: one holder may write several times under one token.
-- Tokens are compared as the decimal strings the writers send (no sign, no leading zero):
-- a longer one is higher, else the greater string. tonumber() would round above 2^53 (a
-- Lua number is a double) and accept a stale token there.
local seen = redis.call('hget', KEYS[1], ARGV[1])
local token = ARGV[3]
if seen and (#seen > #token or (#seen == #token and seen > token)) then
    return 0
end
redis.call('hset', KEYS[1], ARGV[1], token, ARGV[2], ARGV[4])
return 1
