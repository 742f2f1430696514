-- Acquire (or re-enter) a fair lock, or join / stay in its FIFO queue of waiters.
-- KEYS[1] lock hash   KEYS[2] queue LIST   KEYS[3] entry ZSET (see _fair_queue.lua)
-- ARGV[1] lease ms   ARGV[2] owner field
-- ARGV[3] the waiter's entry lease ms (its client refreshes it every renewal period); 0 = one
-- attempt that never joins the queue   ARGV[4] grace ms (see start_turn)
-- ARGV[5] waiter channel prefix (channel = prefix .. owner; channels are not keys, so the
-- script builds them)   ARGV[6] wake-up message
-- The lock goes to the head of the queue only (or to anyone while the queue is empty). A
-- grant wakes the new head, so it re-reads its wait (the new lease). O(1) but for the dead
-- heads dropped.
-- Returns nil when acquired, else the ms to sleep before trying again (-1: until woken).
-- @include server_time
-- @include kinds
-- @include fair_queue

local lock, queue, zset = KEYS[1], KEYS[2], KEYS[3]
local owner, prefix, message = ARGV[2], ARGV[5], ARGV[6]

local pttl = redis.call('pttl', lock)
if pttl ~= -2 then
    local fields = redis.pcall('hmget', lock, owner, 'mode')
    local wrong = refused(fields, lock, 'hash') or (fields[2] and kind_error(lock, false))
    if wrong then
        return wrong
    end
    if fields[1] then  -- re-entry
        redis.call('hincrby', lock, owner, 1)
        redis.call('pexpire', lock, ARGV[1])
        return nil
    end
end

local front = redis.pcall('lrange', queue, 0, 1)
local wrong = refused(front, queue, 'list')
if wrong then
    return wrong
end
local head, second = front[1], front[2]
local now = nil

if pttl == -2 and head and head ~= owner then
    -- The lock is free and not the caller's turn: heads whose entry ran out are dead. The
    -- PUBLISH (which an ACL can refuse) comes before the writes: a refused one changes nothing.
    now = now_ms()
    local dead
    dead, head = dead_heads(queue, zset, now)
    if dead > 0 then
        second = redis.call('lindex', queue, dead + 1)
        if head and head ~= owner then
            redis.call('publish', prefix .. head, message)
        end
        drop_heads(queue, zset, dead)
        if head and head ~= owner then
            start_turn(zset, head, now, tonumber(ARGV[4]))
        end
    end
end

if pttl == -2 and (not head or head == owner) then
    if head then  -- leave the queue; the waiter behind is the new head: wake it
        if second then
            redis.call('publish', prefix .. second, message)
        end
        wrong = refused(redis.pcall('zrem', zset, owner), zset, 'zset')
        if wrong then
            return wrong
        end
        redis.call('lpop', queue)
    else
        wrong = type_error(zset, 'zset')  -- untouched, but another kind's key is refused
        if wrong then
            return wrong
        end
    end
    redis.call('hset', lock, owner, 1)
    redis.call('pexpire', lock, ARGV[1])
    return nil
end

local entry = tonumber(ARGV[3])
if entry > 0 and head ~= owner then
    now = now or now_ms()
    local added = redis.pcall('zadd', zset, 'NX', now + entry, owner)
    wrong = refused(added, zset, 'zset')
    if wrong then
        return wrong
    end
    if added == 1 and redis.call('rpush', queue, owner) == 1 then
        head = owner
    end
end

if head == owner then  -- the head sleeps until the lease ends, or an unlock wakes it
    return pttl
end
if pttl == -2 and head then  -- a live head's turn: look again if its entry runs out
    now = now or now_ms()
    return math.max(tonumber(redis.call('zscore', zset, head)) - now, 1)
end
return -1  -- behind the head: woken when it becomes the head
