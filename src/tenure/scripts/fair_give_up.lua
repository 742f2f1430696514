-- A fair-lock waiter leaves the queue (timed out, cancelled, failed).
-- KEYS[1] lock hash   KEYS[2] queue LIST   KEYS[3] score ZSET   KEYS[4] alive-until HASH
-- (see _fair_queue.lua)
-- ARGV[1] owner field   ARGV[2] grace ms (see start_turn)   ARGV[3] waiter channel prefix
-- (channel = prefix .. owner; channels are not keys, so the script builds them)
-- ARGV[4] wake-up message
-- If it was the head, the new head is woken (its turn starts when the lock is free). The
-- waiters behind it move up a place (Redisson's rule when a waiter gives up: WAIT off each
-- one's score), so O(waiters behind it). Returns 1 if the waiter was queued, else 0.
-- The wake-up (PUBLISH, which an ACL can refuse) comes before the writes.
-- @include server_time
-- @include kinds
-- @include fair_queue

local lock, queue, zset, alive, owner = KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1]
local front = redis.pcall('lrange', queue, 0, 1)
local wrong = refused(front, queue, 'list') or type_error(alive, 'hash')
if wrong then
    return wrong
end
if front[1] == owner and front[2] then
    redis.call('publish', ARGV[3] .. front[2], ARGV[4])
end
local removed = redis.pcall('zrem', zset, owner)
wrong = refused(removed, zset, 'zset')
if wrong then
    return wrong
end
redis.call('hdel', alive, owner)
if front[1] == owner then
    redis.call('lpop', queue)
    move_up(zset, redis.call('lrange', queue, 0, -1))
    if front[2] and redis.call('exists', lock) == 0 then
        start_turn(zset, alive, front[2], now_ms(), tonumber(ARGV[2]))
    end
else
    local place = redis.call('lpos', queue, owner)
    if place then
        move_up(zset, redis.call('lrange', queue, place + 1, -1))
        redis.call('lrem', queue, 0, owner)
    end
end
return removed
