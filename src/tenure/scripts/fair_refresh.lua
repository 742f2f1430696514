-- The renewal pass for fair-lock waiters (tenure.core.watchdog): keep many live waiters of
-- one client alive in one call, so that none is taken for dead, by tenure or by Redisson.
-- KEYS: per waiter its lock hash, queue LIST, score ZSET and alive-until HASH (see
-- _fair_queue.lua)
-- ARGV[1] entry lease ms   ARGV[2] grace ms   ARGV[3] wake-up message, then per waiter its
-- owner field and its channel prefix (channel = prefix .. owner)
-- Per waiter: its alive-until time becomes now + entry, and its score at least that plus
-- WAIT per place up to its own (its place found with LPOS: O(its place)).
-- Per lock (once per call), when the lock is free: the dead heads are dropped and the first
-- live one is woken and its turn started (a lost wake-up, a holder whose lease ran out or a
-- releasing client that died are noticed within one pass). A waiter no longer in the queue
-- (dropped as dead while its client was away) is woken: its next attempt joins again.
-- Returns a list: per waiter 1 (refreshed) or 0 (it was no longer queued).
-- @include server_time
-- @include kinds
-- @include fair_queue

local now = now_ms()
local entry, grace, message = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local checked = {}  -- zset -> the lock's keys are of the right types
local reply = {}
for i = 1, #KEYS / 4 do
    local lock, queue, zset, alive = KEYS[4 * i - 3], KEYS[4 * i - 2], KEYS[4 * i - 1], KEYS[4 * i]
    local owner, prefix = ARGV[2 + 2 * i], ARGV[3 + 2 * i]
    if checked[zset] == nil then
        checked[zset] = not (
            type_error(queue, 'list') or type_error(zset, 'zset') or type_error(alive, 'hash')
        )
        if checked[zset] and redis.call('exists', lock) == 0 then
            local dead, head = dead_heads(queue, zset, alive, now)
            if head then
                redis.call('publish', prefix .. head, message)
            end
            drop_heads(queue, zset, alive, dead)
            if head then
                start_turn(zset, alive, head, now, grace)
            end
        end
    end
    local ok = 0
    if checked[zset] then
        local place = redis.call('zscore', zset, owner) and redis.call('lpos', queue, owner)
        if place then
            redis.call('zadd', zset, 'XX', 'GT', now + entry + (place + 1) * WAIT, owner)
            keep_alive(alive, owner, now, entry)
            ok = 1
        else
            forget(zset, alive, owner)  -- a score with no place in the queue is a leftover
            redis.call('publish', prefix .. owner, message)
        end
    end
    reply[i] = ok
end
return reply
