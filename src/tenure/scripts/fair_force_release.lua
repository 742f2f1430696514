-- Delete a fair lock whoever holds it, drop the dead waiters and wake the queue head, whose
-- turn starts.
-- KEYS[1] lock hash   KEYS[2] queue LIST   KEYS[3] score ZSET   KEYS[4] alive-until HASH
-- (see _fair_queue.lua)
-- ARGV[1] unlock message   ARGV[2] waiter channel prefix (channel = prefix .. owner;
-- channels are not keys, so the script builds them)   ARGV[3] grace ms (see start_turn)
-- Returns 1 when something was held, else 0. The wake-up (PUBLISH, which an ACL can refuse)
-- comes before the writes. O(waiters x dead): an operator's tool, not a common path.
-- @include server_time
-- @include kinds
-- @include fair_queue

local lock, queue, zset, alive = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local wrong = kind_error(lock, false) or type_error(queue, 'list') or type_error(zset, 'zset')
    or type_error(alive, 'hash')
if wrong then
    return wrong
end
local now = now_ms()
local dead = {}
for _, waiter in ipairs(redis.call('zrangebyscore', zset, '-inf', now)) do
    dead[waiter] = true  -- also a score left with no place in the queue
end
local head = nil
for _, waiter in ipairs(redis.call('lrange', queue, 0, -1)) do
    if dead[waiter] or is_dead(zset, alive, waiter, now) then
        dead[waiter] = true
    elseif not head then
        head = waiter
    end
end
if head then
    redis.call('publish', ARGV[2] .. head, ARGV[1])
end
for waiter in pairs(dead) do
    forget(zset, alive, waiter)
    redis.call('lrem', queue, 0, waiter)
end
if head then
    start_turn(zset, alive, head, now, tonumber(ARGV[3]))
end
return redis.call('del', lock)
