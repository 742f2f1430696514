-- The renewal pass for fair-lock waiters (tenure.core.watchdog): push forward the queue
-- entries of many live waiters of one client in one call, so that none is taken for dead.
-- KEYS: per waiter its lock hash, queue LIST and entry ZSET (see _fair_queue.lua)
-- ARGV[1] entry lease ms   ARGV[2] grace ms   ARGV[3] wake-up message, then per waiter its
-- owner field and its channel prefix (channel = prefix .. owner)
-- Per lock (once per call), when the lock is free: the heads whose entry ran out are dropped
-- and the first live one is woken and its turn started (a lost wake-up, a holder whose lease
-- ran out or a releasing client that died are noticed within one pass). A waiter whose entry is gone (dropped as dead while its client
-- was away) is woken: its next attempt joins again.
-- Returns a list: per waiter 1 (refreshed) or 0 (its entry was gone).
-- @include server_time
-- @include kinds
-- @include fair_queue

local now = now_ms()
local entry, grace, message = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local checked = {}  -- zset -> the lock's keys are of the right types
local reply = {}
for i = 1, #KEYS / 3 do
    local lock, queue, zset = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
    local owner, prefix = ARGV[2 + 2 * i], ARGV[3 + 2 * i]
    if checked[zset] == nil then
        checked[zset] = not (type_error(queue, 'list') or type_error(zset, 'zset'))
        if checked[zset] and redis.call('exists', lock) == 0 then
            local dead, head = dead_heads(queue, zset, now)
            if head then
                redis.call('publish', prefix .. head, message)
            end
            drop_heads(queue, zset, dead)
            if head then
                start_turn(zset, head, now, grace)
            end
        end
    end
    local ok = 0
    if checked[zset] then
        if redis.call('zadd', zset, 'XX', 'CH', now + entry, owner) == 1
                or redis.call('zscore', zset, owner) then
            ok = 1
        else
            redis.call('publish', prefix .. owner, message)
        end
    end
    reply[i] = ok
end
return reply
