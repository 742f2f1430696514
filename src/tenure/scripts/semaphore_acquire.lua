-- Take permits from a Semaphore if enough are available (a count never set has none).
-- KEYS[1] count   ARGV[1] permits
-- Returns 1 when taken, 0 when too few are available, -1 when the count was never set
-- (the caller says so once: a wait that only a set, add or release can end).
local value = redis.call('get', KEYS[1])
if value == false then
    return -1
end
if tonumber(value) >= tonumber(ARGV[1]) then
    redis.call('decrby', KEYS[1], ARGV[1])
    return 1
end
return 0
