-- A fair lock's queue (tenure.core.fair): LIST of waiting owners, head first, and a ZSET
-- owner -> the server epoch ms at which that waiter's entry runs out. A live waiter's client
-- keeps pushing it forward (fair_refresh.lua, once per renewal period); a waiter whose entry
-- ran out is dead and is dropped when it reaches the head. When the lock becomes free, the
-- head's turn starts: its entry is cut to at most now + grace (one renewal period), so a dead
-- head holds the line up for one period at most. No operation rewrites the other entries.
-- Needs the server_time and kinds fragments.

-- refused(reply, key, expected): nil when a redis.pcall reply is not an error; the kind error
-- (tenure.errors.LockKindError) when `key` is of another type; else the error itself.
local function refused(reply, key, expected)
    if type(reply) ~= 'table' or not reply.err then
        return nil
    end
    if string.find(reply.err, 'WRONGTYPE', 1, true) then
        return type_error(key, expected)
    end
    return redis.error_reply(reply.err)
end

-- dead_heads(queue, zset, now): reads only. How many waiters at the head of the queue are
-- dead (no entry, or one that ran out by `now`), and the first live waiter behind them (nil
-- when none).
local function dead_heads(queue, zset, now)
    local dead = 0
    local head = redis.call('lindex', queue, 0)
    while head do
        local expiry = redis.call('zscore', zset, head)
        if expiry and tonumber(expiry) > now then
            break
        end
        dead = dead + 1
        head = redis.call('lindex', queue, dead)
    end
    return dead, head
end

-- drop_heads(queue, zset, dead): remove the first `dead` waiters (found by dead_heads).
local function drop_heads(queue, zset, dead)
    for _ = 1, dead do
        redis.call('zrem', zset, redis.call('lpop', queue))
    end
end

-- start_turn(zset, head, now, grace): the lock is free and it is `head`'s turn: its entry
-- runs out within `grace` ms unless its client (alive) takes the lock or refreshes it.
local function start_turn(zset, head, now, grace)
    redis.call('zadd', zset, 'XX', 'LT', now + grace, head)
end
