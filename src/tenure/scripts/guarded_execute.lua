-- A guarded write: run one command only while the caller holds the lock, atomically.
-- KEYS[1] lock hash   KEYS[2] the command's first key (ARGV[3]; declared, not read here)
-- ARGV[1] the caller's owner field   ARGV[2..] the command and its arguments
-- Returns {1, reply} when the command ran, {0} when the owner holds nothing (expired or
-- taken): then nothing ran. The command's keys must share the lock's cluster slot.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return {0}
end
return {1, redis.call(unpack(ARGV, 2))}
