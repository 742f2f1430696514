-- Reconcile guard, put in front of a release script by tenure.scripts.guarded(): after an
-- acquire whose outcome is unknown (timeout, lost connection, cancellation), release one hold
-- only while the owner's hold count on the server is above the count its client recorded.
-- Two extra ARGV at the end: the owner's hash field, then that recorded count. The guarded
-- script answers nil once the server is back to the client's count (nothing to undo).
if (tonumber(redis.call('hget', KEYS[1], ARGV[#ARGV - 1])) or 0) <= tonumber(ARGV[#ARGV]) then
    return nil
end
