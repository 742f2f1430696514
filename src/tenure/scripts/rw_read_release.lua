-- Release one read hold of a read-write lock.
-- KEYS[1] lock hash   KEYS[2] channel   KEYS[3] the caller's read-timeout prefix
-- ARGV[1] unlock message   ARGV[2] owner (reader field)
-- ARGV[3] base of every reader's timeout keys: base .. ':' .. owner .. ':rwlock_timeout:' .. n
-- In read mode the hash then lives as long as the longest remaining read hold (so a dead
-- reader's hold, whose timeout key expired, no longer counts); with none left it is deleted
-- and one waiter is woken. Returns nil when the owner holds no read hold, 0 when the lock is
-- still held, 1 when it was freed.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false or redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return nil
end
local count = redis.call('hincrby', KEYS[1], ARGV[2], -1)
redis.call('del', KEYS[3] .. ':' .. (count + 1))
if count == 0 then
    redis.call('hdel', KEYS[1], ARGV[2])
end
if mode == 'write' then
    return 0 -- the caller still holds the write lock, which keeps its own lease
end
local longest = -2
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields, 2 do
    local holds = tonumber(fields[i + 1])
    if fields[i] ~= 'mode' and holds then
        for n = 1, holds do
            local pttl = redis.call('pttl', ARGV[3] .. ':' .. fields[i] .. ':rwlock_timeout:' .. n)
            if pttl > longest then
                longest = pttl
            end
        end
    end
end
if longest > 0 then
    redis.call('pexpire', KEYS[1], longest)
    return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1
