-- Acquire (or re-enter) a fair lock, or join / stay in its FIFO queue of waiters.
-- KEYS[1] lock hash   KEYS[2] queue LIST   KEYS[3] score ZSET   KEYS[4] alive-until HASH
-- (see _fair_queue.lua)
-- ARGV[1] lease ms   ARGV[2] owner field
-- ARGV[3] the waiter's entry lease ms (its client refreshes it every renewal period); 0 = one
-- attempt that never joins the queue; -1 = the caller is queued already (its client knows:
-- only its turn is checked); -3 = the caller is queued and asks for its place (its first
-- look once subscribed: it may have become the head meanwhile)   ARGV[4] grace ms (see
-- start_turn)
-- ARGV[5] waiter channel prefix (channel = prefix .. owner; channels are not keys, so the
-- script builds them)   ARGV[6] wake-up message   ARGV[7] 1 when the caller asks for a
-- lease_time (that lease may run out with no release: the client then watches its end if
-- waiters remain)   ARGV[8] '1' when the caller's client records a hold here (a re-entry
-- expected; optional, sent with ARGV[3] 0): granted only on top of the hold the server has
-- The lock goes to the head of the queue only (or to anyone while the queue is empty). A
-- release wakes the head; a lease that runs out is noticed by a turn watcher (fair_turn.lua).
-- O(1) but for the dead heads dropped, and a grant from the queue: every other waiter moves
-- up (Redisson's rule: O(waiters)).
-- Returns nil when acquired ('W' when acquired with ARGV[7] = 1 and waiters remain), else
-- the ms to sleep before trying again: the lease left for
-- the head (-1: no expiry, until woken), -2 behind the head (until woken: it will be when it
-- becomes the head). A queued caller (ARGV[3] -1) is only ever woken as the head: it is
-- told the lease left without reading the queue; one asking for its place (-3) is told
-- -2 or the lease left, as a caller that joins. A caller that dropped dead heads at a free
-- lock and woke the next is told that head's turn (ms) instead of -2: it looks again then.
-- 'lost' when a re-entry was expected (ARGV[8]) and the caller holds nothing: its earlier
-- hold was lost, and nothing is granted nor queued (lock_acquire.lua says why).
-- @include server_time
-- @include kinds
-- @include fair_queue

local lock, queue, zset, alive = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local owner, prefix, message = ARGV[2], ARGV[5], ARGV[6]
local entry = tonumber(ARGV[3])
local wrong

-- granted(): the grant's reply
local function granted()
    if ARGV[7] == '1' and redis.call('exists', queue) == 1 then
        return 'W'
    end
    return nil
end

-- join(now, pttl): add the caller at the tail unless it is queued, with the score of
-- _fair_queue.lua (at least Redisson's chained one: the last waiter's score, or now + the
-- lock's PTTL, plus WAIT). Returns its place (1: the head), or 0 when it was queued already
-- (place unknown).
local function join(now, pttl)
    local ahead = redis.pcall('llen', queue)
    wrong = refused(ahead, queue, 'list')
    if wrong then
        return 0
    end
    local chained = now + math.max(pttl, 0)
    if ahead > 0 then
        chained = tonumber(redis.pcall('zscore', zset, redis.call('lindex', queue, -1))) or now
    end
    local score = math.max(chained, now + entry + ahead * WAIT) + WAIT
    local added = redis.pcall('zadd', zset, 'NX', score, owner)
    wrong = refused(added, zset, 'zset')
    if wrong or added == 0 then
        return 0
    end
    wrong = refused(redis.pcall('hset', alive, owner, now + entry), alive, 'hash')
    if wrong then
        redis.call('zrem', zset, owner)
        return 0
    end
    if redis.call('pttl', alive) < entry then
        redis.call('pexpire', alive, entry)
    end
    return redis.call('rpush', queue, owner)
end

local pttl = redis.call('pttl', lock)
if pttl ~= -2 then
    -- Held. Unless the client knows the caller is queued (it waits, so it holds nothing):
    -- re-entry, and the kind check before any write.
    if entry >= 0 then
        local fields = redis.pcall('hmget', lock, owner, 'mode')
        wrong = refused(fields, lock, 'hash') or (fields[2] and kind_error(lock, false))
        if wrong then
            return wrong
        end
        if fields[1] then  -- re-entry
            redis.call('hincrby', lock, owner, 1)
            redis.call('pexpire', lock, ARGV[1])
            return nil
        end
        if ARGV[8] == '1' then
            return 'lost'
        end
        if entry == 0 then
            return pttl
        end
        local place = join(now_ms(), pttl)
        if wrong then
            return wrong
        end
        if place > 0 then
            return place == 1 and pttl or -2
        end
    end
    if entry == -1 then
        -- Only the head is ever woken: the caller sleeps until the lease ends, as the head
        -- does (it is not told when it becomes the head: see fair_turn.lua).
        return pttl
    end
    local head = redis.pcall('lindex', queue, 0)
    wrong = refused(head, queue, 'list')
    if wrong then
        return wrong
    end
    return head == owner and pttl or -2
end

-- The lock is free.
if ARGV[8] == '1' then
    return 'lost'
end
if entry == -1 or entry == -3 then
    -- A queued caller is woken as the head, and takes the lock (one read fewer: its entry
    -- is popped, and pushed back in the rare case it is not the head; then one asking for
    -- its place reads it below).
    local popped = redis.pcall('lpop', queue)
    wrong = refused(popped, queue, 'list')
    if wrong then
        return wrong
    end
    if popped == owner then
        wrong = granted_head(zset, alive, owner)
        if wrong then
            redis.call('lpush', queue, owner)
            return wrong
        end
        redis.call('hset', lock, owner, 1)
        redis.call('pexpire', lock, ARGV[1])
        return granted()
    end
    if popped then
        redis.call('lpush', queue, popped)
    end
end
local front = redis.pcall('lrange', queue, 0, 0)
wrong = refused(front, queue, 'list')
if wrong then
    return wrong
end
local head = front[1]
local now, turn = nil, nil
if head and head ~= owner then
    -- Not the caller's turn, unless the head is dead: then, as Redisson's acquire does, the
    -- dead heads are dropped first (for every caller: one that waits would otherwise join
    -- behind a dead head at a free lock and sleep until a renewal pass or its deadline).
    -- The PUBLISH (which an ACL can refuse) comes before the writes: a refused one changes
    -- nothing.
    now = now_ms()
    local gone
    gone, wrong = head_dead(zset, alive, head, now)
    if wrong then
        return wrong
    end
    if gone then
        local dead
        dead, head = dead_heads(queue, zset, alive, now)
        if head and head ~= owner then
            redis.call('publish', prefix .. head, message)
        end
        drop_heads(queue, zset, alive, dead)
        if head and head ~= owner then
            turn = start_turn(zset, alive, head, now, tonumber(ARGV[4]))
        end
    end
end
if head and head ~= owner and entry ~= 0 and entry ~= -1 then
    -- A live head's turn: a caller that waits joins the tail (or, queued, stays) and is
    -- woken when it becomes the head. Unless this call woke that head (dead heads dropped):
    -- no turn watcher follows this wake-up (a release's client starts one), so the caller
    -- looks again itself when the head's turn ends (told its length, as a lease left):
    -- a head gone too is then dropped, instead of at a renewal pass a period later.
    if entry > 0 then
        join(now, -2)
        if wrong then
            return wrong
        end
    end
    return turn or -2
end

if not head or head == owner then
    if head then  -- leave the queue
        wrong = granted_head(zset, alive, owner)
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
    return head and granted() or nil
end

-- A live head's turn: look again when it ends (if the head has not come by then).
if not turn then
    local score = tonumber(redis.call('zscore', zset, head))
    local until_ms = redis.call('hget', alive, head)
    turn = math.max(math.min(score, tonumber(until_ms or score)) - now, 1)
end
return turn
