-- Acquire (or re-enter) a fair lock, or join / stay in its FIFO queue of waiters.
-- KEYS[1] lock hash   KEYS[2] queue LIST (owners, head first)   KEYS[3] deadline ZSET
-- ARGV[1] lease ms   ARGV[2] owner field
-- ARGV[3] the caller's wait allowance ms; 0 = one attempt that never joins the queue
-- ARGV[4] waiter channel prefix (channel = prefix .. owner; channels are not keys, so the
-- script builds them)   ARGV[5] wake-up message
-- A waiter's deadline (server epoch ms) is when it must have taken the lock or be dropped as
-- dead: the deadline of the waiter ahead (the head: the lock's expiry) plus its own
-- allowance. Every script that moves the lock's expiry moves all deadlines by as much.
-- Any change of the queue head sends the new head a wake-up, so it re-reads its wait.
-- Returns nil when acquired, else the ms to sleep before trying again (-1: until woken).
-- @include server_time
-- @include fair_shift
-- @include kinds

local wrong = kind_error(KEYS[1], false) or type_error(KEYS[2], 'list')
    or type_error(KEYS[3], 'zset')
if wrong then
    return wrong
end

local now = now_ms()
local lease = tonumber(ARGV[1])
local owner = ARGV[2]
local allowance = tonumber(ARGV[3])

local function wake(waiter)
    if waiter then
        redis.call('publish', ARGV[4] .. waiter, ARGV[5])
    end
end

if redis.call('hexists', KEYS[1], owner) == 1 then
    local pttl = redis.call('pttl', KEYS[1])
    redis.call('hincrby', KEYS[1], owner, 1)
    redis.call('pexpire', KEYS[1], lease)
    if pttl >= 0 then
        shift(KEYS[3], lease - pttl)
    end
    return nil
end

local head = redis.call('lindex', KEYS[2], 0)
if redis.call('exists', KEYS[1]) == 0 then
    -- The lock is free: heads that missed their deadline (dead or gone) are dropped, after
    -- the wake-ups (a PUBLISH an ACL refuses must fail before any write).
    local dead = 0
    while head do
        local deadline = redis.call('zscore', KEYS[3], head)
        if deadline and tonumber(deadline) > now then
            break
        end
        dead = dead + 1
        head = redis.call('lindex', KEYS[2], dead)
    end
    local function drop_dead()
        for _ = 1, dead do
            redis.call('zrem', KEYS[3], redis.call('lpop', KEYS[2]))
        end
    end
    if not head or head == owner then
        if head then
            -- Leave the queue; re-anchor the deadlines behind on this lease's end.
            wake(redis.call('lindex', KEYS[2], dead + 1))
            drop_dead()
            local own = tonumber(redis.call('zscore', KEYS[3], owner))
            redis.call('lpop', KEYS[2])
            redis.call('zrem', KEYS[3], owner)
            shift(KEYS[3], now + lease - own)
        else
            drop_dead()
        end
        redis.call('hset', KEYS[1], owner, 1)
        redis.call('pexpire', KEYS[1], lease)
        return nil
    end
    if dead > 0 then
        -- the new head may take the free lock; the one behind must re-read its wait
        wake(head)
        wake(redis.call('lindex', KEYS[2], dead + 1))
        drop_dead()
    end
end

if allowance > 0 and not redis.call('zscore', KEYS[3], owner) then
    local pttl = redis.call('pttl', KEYS[1])
    local base = now + math.max(pttl, 0)
    local last = redis.call('lindex', KEYS[2], -1)
    local last_deadline = last and redis.call('zscore', KEYS[3], last)
    if last_deadline then
        base = math.max(base, tonumber(last_deadline))
    end
    redis.call('lrem', KEYS[2], 0, owner)
    redis.call('zadd', KEYS[3], base + allowance, owner)
    redis.call('rpush', KEYS[2], owner)
    if not head then
        head = owner
    end
end

-- How long to sleep. The head sleeps until the lease ends (or an unlock wakes it). Others
-- only need to look again when the head's deadline passes, so that a dead head is dropped;
-- while the lock is held they look again after (deadline - expiry), the head's allowance,
-- in case the lock is released early and the deadlines move ahead.
local pttl = redis.call('pttl', KEYS[1])
if not head or head == owner or pttl == -1 then
    return pttl
end
local head_deadline = redis.call('zscore', KEYS[3], head)
local until_head = head_deadline and (tonumber(head_deadline) - now) or 0
return math.max(until_head - math.max(pttl, 0), 1)
