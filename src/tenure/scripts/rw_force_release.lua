-- Delete a read-write lock whoever holds it, if it is in the given mode; wake every waiter.
-- KEYS[1] lock hash   KEYS[2] channel   KEYS[3..] every reader's read-timeout keys
-- ARGV[1] message   ARGV[2] mode of the side releasing: 'read' or 'write'
-- ARGV[3..] the declaration of every reader field and its count (see _rw_readers.lua)
-- Returns 1 when the lock was held in that mode (now deleted), the stale-declaration reply
-- when the declaration does not match the hash (nothing changed), else 0.
-- @include rw_readers

if redis.call('hget', KEYS[1], 'mode') ~= ARGV[2] then
    return 0
end
local readers, stale = declared_readers(KEYS[1], 3, 3, true, 0)
if not readers then
    return stale
end
-- Publish first (an ACL may refuse it): a refused PUBLISH changes nothing.
redis.call('publish', KEYS[2], ARGV[1])
for _, reader in pairs(readers) do
    for n = 1, reader[2] do
        redis.call('del', KEYS[reader[1] + n - 1])
    end
end
redis.call('del', KEYS[1])
return 1
