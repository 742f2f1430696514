-- Acquire (or re-enter) a reentrant lock.
-- KEYS[1] lock hash   KEYS[2] wake queue (optional: with ARGV[4])
-- ARGV[1] lease ms   ARGV[2] owner field
-- ARGV[3] '1' for a retry within a wait by an owner that holds nothing here; '2' for an owner
-- whose client records a hold here (a re-entry expected); '' or absent otherwise
-- ARGV[4] the caller's client uuid, to register it in the wake queue when refused: a waiter
-- listening on its client channel (optional; see _wake.lua)
-- Returns nil when acquired, else the holder's remaining lease in ms (-1: no expiry), or
-- 'lost' when a re-entry was expected (ARGV[3] '2') and the caller holds nothing: its
-- earlier hold was lost (lease run out, failover, force-release), and nothing is granted. A
-- fresh grant taken for a re-entry would be counted on top of the lost hold, and the
-- release of either would free the lock under the other (reviewer R8, F1).
-- Calls are counted, since waiters retry on unlocks: PTTL first, so a free lock is granted
-- with no read of the hash. A held one costs one HMGET more (lock_count: the kind checks and
-- re-entry at once); a retry costs the PTTL alone, as its owner cannot re-enter and its first
-- attempt already checked the kind.
-- A free lock is granted before the fragments below are included: every uncontended grant
-- runs PTTL, HINCRBY and PEXPIRE and defines no function (each local function is made anew
-- on every run of a script).

local ttl = redis.call('pttl', KEYS[1])
if ttl == -2 then
    if ARGV[3] == '2' then
        return 'lost'
    end
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
-- @include kinds
-- @include wake_register

if ARGV[3] ~= '1' then
    local count, wrong = lock_count(KEYS[1], ARGV[2])
    if wrong then
        return wrong
    end
    if count then -- re-entry
        redis.call('hincrby', KEYS[1], ARGV[2], 1)
        redis.call('pexpire', KEYS[1], ARGV[1])
        if ttl == -1 or ttl - tonumber(ARGV[1]) > ttl / 100 + 2 then
            -- A lease that ends sooner than the one waiters were refused with (beyond the
            -- drift allowance their clocks have anyway): they would sleep to the old end if
            -- the holder went silent. Told as a renewal ('-<ms>', tenure.keys.RENEWED_PREFIX),
            -- which moves their re-check and which Redisson's listeners ignore.
            -- (The lock's channel, keys.lock_channel(), as lock_release.lua builds it.)
            local channel = string.find(KEYS[1], '{', 1, true) and KEYS[1] or '{' .. KEYS[1] .. '}'
            redis.pcall('publish', 'redisson_lock__channel:' .. channel, '-' .. ARGV[1])
        end
        return nil
    end
    if ARGV[3] == '2' then
        return 'lost'
    end
end
if ARGV[4] then
    register(KEYS[2], ARGV[4])
end
return ttl
