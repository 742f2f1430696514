-- Release one hold of a fair lock; once free, wake the queue head only. Its turn (the grace,
-- see start_turn) is started by the releasing client's turn watcher (fair_turn.lua) if it
-- has not taken the lock by the watcher's first look: under contention, never.
-- KEYS[1] lock hash   KEYS[2] queue LIST   KEYS[3] score ZSET   KEYS[4] alive-until HASH
-- (see _fair_queue.lua; the release reads the queue only)
-- ARGV[1] unlock message   ARGV[2] lease ms re-applied to the remaining holds
-- ARGV[3] owner field   ARGV[4] waiter channel prefix (channel = prefix .. owner; channels
-- are not keys, so the script builds them)
-- Returns nil when the owner holds nothing, 0 when holds remain, 1 when the lock was freed,
-- 2 when it was freed and the head woken. The wake-up (PUBLISH, which an ACL can refuse)
-- comes before the DEL.
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
if head then
    redis.call('publish', ARGV[4] .. head, ARGV[1])
end
redis.call('del', lock)
return head and 2 or 1
