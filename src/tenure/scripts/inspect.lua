-- Read everything `inspect` reports of one name in one atomic read. Changes nothing.
-- KEYS[1] the name's key   KEYS[2] fencing token   KEYS[3] fair queue   KEYS[4] fair deadlines
-- KEYS[5] a permit-expirable semaphore's permit expiries   KEYS[6] a fair lock's tenure
-- waiters' alive-until times   KEYS[7..11] an election of that name (_election.lua): leader
-- HASH, term counter, candidates LIST, their deadlines ZSET, their values HASH
-- KEYS[12..] keys whose PTTL is wanted too (a read-write lock's read-hold timeout keys,
-- declared after a first read)
-- Returns {server time ms, TYPE of KEYS[1], PTTL of KEYS[1], content (HGETALL of a hash, the
-- value of a string, else false), token or false, queue (LRANGE), deadlines (ZRANGE
-- WITHSCORES; a tenure waiter's the earlier of its score and its alive-until time, when it
-- counts as dead), permits (ZRANGE WITHSCORES, ids as hex), {PTTL of KEYS[12], ...},
-- election: false when none of KEYS[7..11] has its type, else {leader (HGETALL), its PTTL,
-- term counter or false, candidates (LRANGE), deadlines (ZRANGE WITHSCORES), values
-- (HGETALL)}}
-- @include server_time

local kind = redis.call('type', KEYS[1])['ok']
local content = false
if kind == 'hash' then
    content = redis.call('hgetall', KEYS[1])
elseif kind == 'string' then
    content = redis.call('get', KEYS[1])
end
local permits = {}
if redis.call('type', KEYS[5])['ok'] == 'zset' then
    local raw = redis.call('zrange', KEYS[5], 0, -1, 'withscores')
    for i = 1, #raw, 2 do
        permits[i] = string.gsub(raw[i], '.', function(c)
            return string.format('%02x', string.byte(c))
        end)
        permits[i + 1] = raw[i + 1]
    end
end
local deadlines = {}
if redis.call('type', KEYS[4])['ok'] == 'zset' then
    deadlines = redis.call('zrange', KEYS[4], 0, -1, 'withscores')
    if redis.call('type', KEYS[6])['ok'] == 'hash' then
        for i = 1, #deadlines, 2 do
            local alive = tonumber(redis.call('hget', KEYS[6], deadlines[i]))
            if alive and alive < tonumber(deadlines[i + 1]) then
                deadlines[i + 1] = tostring(alive)
            end
        end
    end
end
local queue = {}
if redis.call('type', KEYS[3])['ok'] == 'list' then
    queue = redis.call('lrange', KEYS[3], 0, -1)
end
local token = false
if redis.call('type', KEYS[2])['ok'] == 'string' then
    token = redis.call('get', KEYS[2])
end
local ttls = {}
for i = 12, #KEYS do
    ttls[#ttls + 1] = redis.call('pttl', KEYS[i])
end
local function typed(key, expected)
    return redis.call('type', key)['ok'] == expected
end
local election = false
if typed(KEYS[7], 'hash') or typed(KEYS[8], 'string') or typed(KEYS[9], 'list')
        or typed(KEYS[10], 'zset') then
    election = {
        typed(KEYS[7], 'hash') and redis.call('hgetall', KEYS[7]) or {},
        redis.call('pttl', KEYS[7]),
        typed(KEYS[8], 'string') and redis.call('get', KEYS[8]) or false,
        typed(KEYS[9], 'list') and redis.call('lrange', KEYS[9], 0, -1) or {},
        typed(KEYS[10], 'zset') and redis.call('zrange', KEYS[10], 0, -1, 'withscores') or {},
        typed(KEYS[11], 'hash') and redis.call('hgetall', KEYS[11]) or {},
    }
end
return {now_ms(), kind, redis.call('pttl', KEYS[1]), content, token, queue, deadlines, permits,
        ttls, election}
