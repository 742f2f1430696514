-- A fair lock's queue (tenure.core.fair), shared with Redisson's RedissonFairLock clients:
-- - LIST of waiting owners, head first;
-- - ZSET owner -> score, as Redisson reads it: the server epoch ms after which that waiter
--   counts as dead. Redisson's scripts drop the heads whose score has passed, chain a new
--   waiter's score on the last one's (+ WAIT) and take WAIT off every score at each grant;
-- - HASH (tenure's addition, never read by Redisson) owner -> the server epoch ms until
--   which that tenure waiter counts as alive. Its client pushes it forward once per renewal
--   period (fair_refresh.lua); the key lasts as long as its latest entry.
-- A tenure waiter's score is its alive-until time plus WAIT per place up to its own (when
-- it joins, at least Redisson's chained score): a grant ahead (Redisson's or tenure's, both
-- take WAIT off every score) or a waiter ahead leaving (the same) moves it one place up, so
-- Redisson's rules never find a live tenure waiter dead; a Java waiter behind it chains on
-- that score and gets at least the time Redisson would give it; a tenure waiter whose
-- client died stops being pushed forward and runs out (tenure: its alive-until time;
-- Redisson: its score, WAIT later).
-- A waiter is dead when it has no score, its score has passed, or (tenure's) its
-- alive-until time has passed. When the lock becomes free, the head's turn starts: its
-- score and alive-until time are cut to at most now + grace (one renewal period), so a dead
-- head holds the line up for one period at most; a live tenure head's client pushes them
-- forward again.
-- Needs the server_time and kinds fragments.

-- Redisson's threadWaitTime (RedissonFairLock's default): the ms each place in the queue
-- adds to a score, and each grant takes off.
local WAIT = 300000

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

-- is_dead(zset, alive, waiter, now): reads only (see the rules above).
local function is_dead(zset, alive, waiter, now)
    local score = redis.call('zscore', zset, waiter)
    if not score or tonumber(score) <= now then
        return true
    end
    local until_ms = redis.call('hget', alive, waiter)
    return until_ms ~= false and tonumber(until_ms) <= now
end

-- head_dead(zset, alive, waiter, now): is_dead, for a script that has not checked the kinds
-- of these keys (reads only): also returns the kind error when one is of another type (then
-- false), before anything is dropped.
local function head_dead(zset, alive, waiter, now)
    local score = redis.pcall('zscore', zset, waiter)
    local until_ms = redis.pcall('hget', alive, waiter)
    local wrong = refused(score, zset, 'zset') or refused(until_ms, alive, 'hash')
    if wrong then
        return false, wrong
    end
    return not score or tonumber(score) <= now or (until_ms ~= false and tonumber(until_ms) <= now),
        nil
end

-- dead_heads(queue, zset, alive, now): reads only. How many waiters at the head of the
-- queue are dead, and the first live waiter behind them (nil when none).
local function dead_heads(queue, zset, alive, now)
    local dead = 0
    local head = redis.call('lindex', queue, 0)
    while head and is_dead(zset, alive, head, now) do
        dead = dead + 1
        head = redis.call('lindex', queue, dead)
    end
    return dead, head
end

-- forget(zset, alive, waiter): the waiter's score and alive-until time go.
local function forget(zset, alive, waiter)
    redis.call('zrem', zset, waiter)
    redis.call('hdel', alive, waiter)
end

-- drop_heads(queue, zset, alive, dead): remove the first `dead` waiters (found by
-- dead_heads). As Redisson's own drop, the other scores stay.
local function drop_heads(queue, zset, alive, dead)
    for _ = 1, dead do
        forget(zset, alive, redis.call('lpop', queue))
    end
end

-- rescore(zset, pairs): ZADD XX the flat {score, member, ...} list, in chunks that Lua's
-- unpack takes.
local function rescore(zset, pairs)
    for first = 1, #pairs, 1000 do
        redis.call('zadd', zset, 'XX', unpack(pairs, first, math.min(first + 999, #pairs)))
    end
end

-- move_up(zset, waiters): Redisson's rule for the waiters behind one that left the queue
-- (given up): WAIT off each one's score. O(waiters), in a few calls.
local function move_up(zset, waiters)
    local pairs = {}
    for first = 1, #waiters, 500 do
        local last = math.min(first + 499, #waiters)
        local scores = redis.call('zmscore', zset, unpack(waiters, first, last))
        for i = first, last do
            local score = scores[i - first + 1]
            if score then
                pairs[#pairs + 1] = tonumber(score) - WAIT
                pairs[#pairs + 1] = waiters[i]
            end
        end
    end
    rescore(zset, pairs)
end

-- granted_head(zset, alive, owner): `owner`, the head, is popped off the queue and granted
-- the lock: its entries go and every other waiter moves up (Redisson's grant). Returns the
-- kind error when a key is of another type (then the score is still there), else nil.
local function granted_head(zset, alive, owner)
    local wrong = refused(redis.pcall('hdel', alive, owner), alive, 'hash')
        or refused(redis.pcall('zrem', zset, owner), zset, 'zset')
    if wrong then
        return wrong
    end
    local scored = redis.call('zrange', zset, 0, -1, 'WITHSCORES')
    for i = 2, #scored, 2 do  -- {member, score, ...} -> {score - WAIT, member, ...}
        scored[i - 1], scored[i] = tonumber(scored[i]) - WAIT, scored[i - 1]
    end
    rescore(zset, scored)
    return nil
end

-- keep_alive(alive, waiter, now, entry): `waiter` (a tenure waiter) counts as alive for
-- `entry` ms more; the HASH lasts at least as long.
local function keep_alive(alive, waiter, now, entry)
    redis.call('hset', alive, waiter, now + entry)
    if redis.call('pttl', alive) < entry then
        redis.call('pexpire', alive, entry)
    end
end

-- start_turn(zset, alive, head, now, grace): the lock is free and it is `head`'s turn: it is
-- taken for dead after `grace` ms unless it takes the lock or (a live tenure waiter) its
-- client pushes its entries forward. Returns the ms its turn lasts.
local function start_turn(zset, alive, head, now, grace)
    redis.call('zadd', zset, 'XX', 'LT', now + grace, head)
    local ends = tonumber(redis.call('zscore', zset, head))
    local until_ms = redis.call('hget', alive, head)
    if until_ms and tonumber(until_ms) > now + grace then
        redis.call('hset', alive, head, now + grace)
    elseif until_ms and tonumber(until_ms) < ends then
        ends = tonumber(until_ms)
    end
    return math.max(ends - now, 1)
end
