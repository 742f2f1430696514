-- Kind checks (tenure.errors.LockKindError): a script refuses, before any write, a key that
-- another kind of primitive wrote. Two families share a name's lock HASH: Lock, FairLock
-- and FencedLock (owner fields only; they exclude one another, as in Redisson), and the
-- ReadWriteLock (a 'mode' field). Each family refuses the other's hash, and every kind
-- refuses a key of the wrong type. The error reply starts with 'TENURE_KIND '; the client
-- raises it as LockKindError.
-- kind_error(key, rw): nil when `key` is absent or a hash of the caller's family (`rw`:
-- the ReadWriteLock family), else the error reply to return.
-- type_error(key, expected): nil when `key` is absent or of type `expected`, else the reply.
local function kind_reply(key, holds)
    return redis.error_reply('TENURE_KIND key ' .. key .. ' holds ' .. holds)
end

local function type_error(key, expected)
    local found = redis.call('type', key)['ok']
    if found == 'none' or found == expected then
        return nil
    end
    return kind_reply(key, 'a ' .. found .. ', where a ' .. expected .. ' was expected')
end

local function kind_error(key, rw)
    local wrong = type_error(key, 'hash')
    if wrong then
        return wrong
    end
    if redis.call('exists', key) == 0 or (redis.call('hexists', key, 'mode') == 1) == rw then
        return nil
    end
    if rw then
        return kind_reply(key, 'a Lock, FairLock or FencedLock, not a ReadWriteLock')
    end
    return kind_reply(key, 'a ReadWriteLock, not a Lock, FairLock or FencedLock')
end

-- lock_count(key, field): for a Lock-family hash (or no key), `field`'s hold count or false,
-- and nil; else nil and the error reply. One HMGET answers the kind checks (a key of another
-- type fails it; a ReadWriteLock hash has 'mode') and the count at once.
local function lock_count(key, field)
    local found = redis.pcall('hmget', key, 'mode', field)
    if found['err'] then
        return nil, type_error(key, 'hash')
    end
    if found[1] then
        return nil, kind_reply(key, 'a ReadWriteLock, not a Lock, FairLock or FencedLock')
    end
    return found[2], nil
end
