-- Add time to the caller's hold of a lock (Lock, FencedLock, the write side of a
-- ReadWriteLock): the key's remaining lease becomes PTTL + the added time.
-- KEYS[1] lock hash   ARGV[1] owner field   ARGV[2] ms to add   ARGV[3] longest lease ms
-- Returns nil when the owner holds nothing (expired or taken), else the new remaining lease
-- in ms (capped at ARGV[3]); -1 when the key has no expiry (left as it is).
-- @include kinds
-- @include extend_hash

local wrong = kind_error(KEYS[1], false)
if wrong then
    return wrong
end

return (extend_hash(KEYS[1], ARGV[1], ARGV[2], ARGV[3]))
