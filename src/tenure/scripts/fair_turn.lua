-- Watch a queue head's turn (tenure.core.fair: the client that freed the lock looks shortly
-- after, then when the head's entry runs out). While the lock is free: the heads whose entry
-- ran out are dropped, the first live one is woken (again: its wake-up may have been lost)
-- and its turn starts (its entry is cut to the grace, see start_turn).
-- KEYS[1] lock hash   KEYS[2] queue LIST   KEYS[3] entry ZSET (see _fair_queue.lua)
-- ARGV[1] grace ms   ARGV[2] waiter channel prefix (channel = prefix .. owner; channels are
-- not keys, so the script builds them)   ARGV[3] wake-up message
-- Returns -1 when there is nothing to watch (the lock is held, or no one waits), else the ms
-- after which to look again (when the head's entry runs out).
-- @include server_time
-- @include kinds
-- @include fair_queue

local lock, queue, zset = KEYS[1], KEYS[2], KEYS[3]
local wrong = type_error(queue, 'list') or type_error(zset, 'zset')
if wrong then
    return wrong
end
if redis.call('exists', lock) == 1 then
    return -1
end
local now = now_ms()
local dead, head = dead_heads(queue, zset, now)
if head then
    redis.call('publish', ARGV[2] .. head, ARGV[3])
end
drop_heads(queue, zset, dead)
if not head then
    return -1
end
start_turn(zset, head, now, tonumber(ARGV[1]))
return math.max(tonumber(redis.call('zscore', zset, head)) - now, 1)
