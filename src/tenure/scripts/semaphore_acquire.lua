-- Take permits from a Semaphore if enough are available (a count never set has none).
-- KEYS[1] count   ARGV[1] permits
-- Returns 1 when taken, 0 when too few are available.
local value = redis.call('get', KEYS[1])
if value ~= false and tonumber(value) >= tonumber(ARGV[1]) then
    redis.call('decrby', KEYS[1], ARGV[1])
    return 1
end
return 0
