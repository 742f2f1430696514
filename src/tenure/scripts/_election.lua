-- Elections (tenure.core.election). Every election script gets the same KEYS:
-- KEYS[1] leader HASH (owner, value, term, client; PEXPIRE the leader's lease)
-- KEYS[2] term counter STRING (INCR per new leadership, no TTL)
-- KEYS[3] candidates LIST (owner fields, in the order they started campaigning)
-- KEYS[4] deadlines ZSET (candidate owner -> server epoch ms after which it counts as gone)
-- KEYS[5] candidates' HASH (owner -> value, owner..'|lease' -> lease ms, owner..'|client')
-- KEYS[6] change log STREAM (the last LOG_LENGTH-odd leader changes, for observers): fields
--         owner, value, term, client, lease (ms at the change); owner '' = vacant
-- The channel (an argument: channels are not keys) is told the new term when a leader is
-- elected or proclaims, '0' when the leadership falls vacant, '-<lease ms>' on renewal.
-- Needs the kinds and server_time fragments before it.

-- election_wrong(): nil when every key is absent or of its type, else the error reply.
local function election_wrong()
    local wrong = type_error(KEYS[1], 'hash') or type_error(KEYS[2], 'string')
        or type_error(KEYS[3], 'list') or type_error(KEYS[4], 'zset')
        or type_error(KEYS[5], 'hash') or type_error(KEYS[6], 'stream')
    if not wrong and redis.call('exists', KEYS[2]) == 1
            and not tonumber(redis.call('get', KEYS[2])) then
        wrong = redis.error_reply('TENURE_KIND key ' .. KEYS[2] .. ' is not a term counter')
    end
    return wrong
end

-- not_leader(owner): nil when `owner` leads; else what a leader-only script returns: the
-- kind error of a key of the wrong type, or false (a nil reply) when `owner` does not lead.
local function not_leader(owner)
    local wrong = election_wrong()
    if wrong then
        return wrong
    end
    if redis.call('hget', KEYS[1], 'owner') ~= owner then
        return false
    end
    return nil
end

-- log_change(owner, value, term, client, lease): one entry in the change log.
local function log_change(owner, value, term, client, lease)
    redis.call('xadd', KEYS[6], 'MAXLEN', '~', '128', '*', 'owner', owner, 'value', value,
        'term', term, 'client', client, 'lease', lease)
end

-- log_vacant(): the leadership fell vacant (logged once: not after another vacancy).
local function log_vacant()
    local last = redis.call('xrevrange', KEYS[6], '+', '-', 'COUNT', 1)[1]
    if last and last[2][2] == '' then
        return
    end
    log_change('', '', 0, '', '')
end

-- log_leader(): the leader now in KEYS[1] (a new one, or a new value).
local function log_leader()
    local found = redis.call('hmget', KEYS[1], 'owner', 'value', 'term', 'client')
    log_change(found[1], found[2] or '', found[3] or 0, found[4] or '',
        redis.call('pttl', KEYS[1]))
end

-- forget_candidate(owner): its deadline and value go (the LIST entry is the caller's).
local function forget_candidate(owner)
    redis.call('zrem', KEYS[4], owner)
    redis.call('hdel', KEYS[5], owner, owner .. '|lease', owner .. '|client')
end

-- settle(now, channel): while nobody leads, the first live candidate becomes leader with
-- its own value and lease and a new term (candidates past their deadline are dropped on
-- the way). Returns the new term, or nil when a leader exists or no candidate is alive.
local function settle(now, channel)
    if redis.call('exists', KEYS[1]) == 1 then
        return nil
    end
    while true do
        local head = redis.call('lpop', KEYS[3])
        if not head then
            return nil
        end
        local deadline = tonumber(redis.call('zscore', KEYS[4], head))
        local found = redis.call('hmget', KEYS[5], head, head .. '|lease', head .. '|client')
        forget_candidate(head)
        if deadline and deadline > now and found[2] then
            local term = redis.call('incr', KEYS[2])
            redis.call('hset', KEYS[1], 'owner', head, 'value', found[1] or '', 'term', term,
                'client', found[3] or '')
            redis.call('pexpire', KEYS[1], found[2])
            log_leader()
            redis.pcall('publish', channel, tostring(term))  -- refused by an ACL: still elected
            return term
        end
    end
end
