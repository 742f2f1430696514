-- Read the leader, and for an observer the changes since the last it saw.
-- KEYS as _election.lua.
-- ARGV[1] the channel for an observer's read, else '' (a plain read changes nothing)
-- ARGV[2] the id of the last change the observer saw ('' for none)
-- An observer's read that finds nobody leading elects the first live candidate, or logs and
-- tells the channel '0' (vacant) once, so every observer learns that a leader's lease ran out.
-- Returns {owner ('' when vacant), value, term, client name, remaining lease ms, the newest
-- change's id ('' for none), the changes after ARGV[2] (XRANGE entries; none if ARGV[2] is '')}.
-- @include kinds
-- @include server_time
-- @include election

local wrong = election_wrong()
if wrong then
    return wrong
end
if ARGV[1] ~= '' and redis.call('exists', KEYS[1]) == 0 then
    if not settle(now_ms(), ARGV[1]) then
        log_vacant()
        redis.pcall('publish', ARGV[1], '0')
    end
end
local found = redis.call('hmget', KEYS[1], 'owner', 'value', 'term', 'client')
local newest = redis.call('xrevrange', KEYS[6], '+', '-', 'COUNT', 1)[1]
local changes = {}
if ARGV[2] ~= '' then
    changes = redis.call('xrange', KEYS[6], '(' .. ARGV[2], '+', 'COUNT', 128)
end
return {found[1] or '', found[2] or '', tonumber(found[3]) or 0, found[4] or '',
    redis.call('pttl', KEYS[1]), newest and newest[1] or '', changes}
