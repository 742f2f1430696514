-- Delete a read-write lock whoever holds it, if it is in the given mode; wake every waiter.
-- KEYS[1] lock hash   KEYS[2] channel
-- ARGV[1] message   ARGV[2] mode of the side releasing: 'read' or 'write'
-- ARGV[3] base of every reader's timeout keys: base .. ':' .. owner .. ':rwlock_timeout:' .. n
-- Returns 1 when the lock was held in that mode (now deleted), else 0.
if redis.call('hget', KEYS[1], 'mode') ~= ARGV[2] then
    return 0
end
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields, 2 do
    local holds = tonumber(fields[i + 1])
    if fields[i] ~= 'mode' and holds then
        for n = 1, holds do
            redis.call('del', ARGV[3] .. ':' .. fields[i] .. ':rwlock_timeout:' .. n)
        end
    end
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1
