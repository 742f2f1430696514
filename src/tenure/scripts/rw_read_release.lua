-- Release one read hold of a read-write lock.
-- KEYS[1] lock hash   KEYS[2] channel   KEYS[3..] every reader's read-timeout keys
-- ARGV[1] unlock message   ARGV[2] owner (reader field)
-- ARGV[3..] the declaration of every reader field and its count (see _rw_readers.lua)
-- In read mode the hash then lives as long as the longest remaining read hold (so a dead
-- reader's hold, whose timeout key expired, no longer counts); with none left it is deleted
-- and one waiter is woken. Returns nil when the owner holds no read hold, the
-- stale-declaration reply when the declaration does not match the hash (nothing changed),
-- 0 when the lock is still held, 1 when it was freed.
-- Everything is decided before the first write, and the PUBLISH (which an ACL can refuse)
-- is the first write: a refused one changes nothing.
-- @include rw_readers
-- @include kinds

local wrong = kind_error(KEYS[1], true)
if wrong then
    return wrong
end

local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false or redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return nil
end
local readers, stale = declared_readers(KEYS[1], 3, 3, true, 0)
if not readers then
    return stale
end
local own = readers[ARGV[2]]
local count = own[2] - 1
local released = KEYS[own[1] + own[2] - 1] -- the newest hold's timeout key

local function drop_hold()
    if count == 0 then
        redis.call('hdel', KEYS[1], ARGV[2])
    else
        redis.call('hincrby', KEYS[1], ARGV[2], -1)
    end
    redis.call('del', released)
end

if mode == 'write' then
    drop_hold()
    return 0 -- the caller still holds the write lock, which keeps its own lease
end
local longest = -2
for field, reader in pairs(readers) do
    local holds = reader[2]
    if field == ARGV[2] then
        holds = count
    end
    for n = 1, holds do
        local pttl = redis.call('pttl', KEYS[reader[1] + n - 1])
        if pttl > longest then
            longest = pttl
        end
    end
end
if longest > 0 then
    drop_hold()
    redis.call('pexpire', KEYS[1], longest)
    return 0
end
redis.call('publish', KEYS[2], ARGV[1])
redis.call('del', released)
redis.call('del', KEYS[1])
return 1
