-- Release one hold of a fair lock; once free, drop the dead heads (as Redisson's unlock does)
-- and wake the first live one only. Its turn (the grace, see start_turn) is started by the
-- releasing client's turn watcher (fair_turn.lua) if it has not taken the lock by the
-- watcher's first look: under contention, never. Dropping the dead heads here does not rely
-- on that watcher: a client that releases and closes at once (a job that exits) still wakes
-- the live waiter behind a dead head.
-- KEYS[1] lock hash   KEYS[2] queue LIST   KEYS[3] score ZSET   KEYS[4] alive-until HASH
-- (see _fair_queue.lua; read only when someone waits)
-- ARGV[1] unlock message   ARGV[2] lease ms re-applied to the remaining holds
-- ARGV[3] owner field   ARGV[4] waiter channel prefix (channel = prefix .. owner; channels
-- are not keys, so the script builds them)
-- Returns nil when the owner holds nothing, 0 when holds remain, 1 when the lock was freed,
-- 2 when it was freed and a live head woken. The wake-up (PUBLISH, which an ACL can refuse)
-- comes before the writes. O(1) but for the dead heads dropped.
-- @include server_time
-- @include kinds
-- @include fair_queue

local lock, queue, zset = KEYS[1], KEYS[2], KEYS[3]
local fields = redis.pcall('hmget', lock, ARGV[3], 'mode')
local wrong = refused(fields, lock, 'hash') or (fields[2] and kind_error(lock, false))
if wrong then
    return wrong
end
if not fields[1] then
    return nil
end
if tonumber(fields[1]) > 1 then
    redis.call('hincrby', lock, ARGV[3], -1)
    redis.call('pexpire', lock, ARGV[2])
    return 0
end
local head = redis.pcall('lindex', queue, 0)
wrong = refused(head, queue, 'list')
if wrong then
    return wrong
end
local dead = 0
if head then
    local now = now_ms()
    local gone
    gone, wrong = head_dead(zset, KEYS[4], head, now)
    if wrong then
        return wrong
    end
    if gone then
        dead, head = dead_heads(queue, zset, KEYS[4], now)
    end
end
if head then
    redis.call('publish', ARGV[4] .. head, ARGV[1])
end
drop_heads(queue, zset, KEYS[4], dead)
redis.call('del', lock)
return head and 2 or 1
