-- A fair-lock waiter leaves the queue (timed out, cancelled, failed).
-- KEYS[1] lock hash   KEYS[2] queue LIST   KEYS[3] deadline ZSET
-- ARGV[1] owner field   ARGV[2] the waiter's allowance ms (its share of the deadlines behind)
-- ARGV[3] waiter channel prefix (channel = prefix .. owner; channels are not keys, so the
-- script builds them)   ARGV[4] wake-up message
-- The waiters behind move ahead by its allowance, so deadlines never drift; if it was the
-- head (or second), the new front of the queue is woken to re-read its wait.
-- Returns 1 if the waiter was queued, else 0.
-- The wake-ups (PUBLISH, which an ACL can refuse) come before the writes: a refused one
-- changes nothing.
local queue = redis.call('lrange', KEYS[2], 0, -1)
local at = nil
for i, waiter in ipairs(queue) do
    if waiter == ARGV[1] then
        at = i
        break
    end
end
if not at then
    redis.call('zrem', KEYS[3], ARGV[1])
    return 0
end
if at <= 2 then
    -- a new head (it may take a free lock) or a new second: they re-read their waits
    for i = 2, 3 do
        if queue[i] and i ~= at then
            redis.call('publish', ARGV[3] .. queue[i], ARGV[4])
        end
    end
end
redis.call('zrem', KEYS[3], ARGV[1])
for i = at + 1, #queue do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[2]), queue[i])
end
redis.call('lrem', KEYS[2], 0, ARGV[1])
return 1
