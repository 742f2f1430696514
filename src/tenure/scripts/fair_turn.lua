-- Watch a queue head's turn (tenure.core.fair: the client that freed the lock looks shortly
-- after, then when the head's turn ends). While the lock is free: the dead heads are
-- dropped, the first live one is woken (again: its wake-up may have been lost) and its turn
-- starts (see start_turn).
-- KEYS[1] lock hash   KEYS[2] queue LIST   KEYS[3] score ZSET   KEYS[4] alive-until HASH
-- (see _fair_queue.lua)
-- ARGV[1] grace ms   ARGV[2] waiter channel prefix (channel = prefix .. owner; channels are
-- not keys, so the script builds them)   ARGV[3] wake-up message
-- While the lock is held and someone waits: nothing, but look again when its lease ends (a
-- holder that died, or let its lease run out, is replaced at once: the head is not told when
-- it becomes the head, so this is what notices).
-- Returns {0, 0} when there is nothing to watch (no one waits, or a lock with no expiry),
-- {1, ms left of the lease} while held, {2, ms left of the woken head's turn} while free.
-- @include server_time
-- @include kinds
-- @include fair_queue

local lock, queue, zset, alive = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local wrong = type_error(queue, 'list') or type_error(zset, 'zset') or type_error(alive, 'hash')
if wrong then
    return wrong
end
local pttl = redis.call('pttl', lock)
if pttl ~= -2 then  -- held: look again when the lease ends, while someone waits
    if pttl == -1 or redis.call('exists', queue) == 0 then
        return {0, 0}
    end
    return {1, pttl}
end
local now = now_ms()
local dead, head = dead_heads(queue, zset, alive, now)
if head then
    redis.call('publish', ARGV[2] .. head, ARGV[3])
end
drop_heads(queue, zset, alive, dead)
if not head then
    return {0, 0}
end
return {2, start_turn(zset, alive, head, now, tonumber(ARGV[1]))}
