-- Read the leader: {owner, value, term, client name, remaining lease ms}, or nil if vacant.
-- KEYS as _election.lua.   ARGV[1] the channel for a lease-end re-check, else ''
-- A re-check (an observer woke at the leader's lease end) that finds nobody leading elects
-- the first live candidate, or tells the channel '0' (vacant) so every observer learns it.
-- @include kinds
-- @include server_time
-- @include election

local wrong = election_wrong()
if wrong then
    return wrong
end
if ARGV[1] ~= '' and redis.call('exists', KEYS[1]) == 0 then
    if not settle(now_ms(), ARGV[1]) then
        redis.pcall('publish', ARGV[1], '0')
    end
end
local found = redis.call('hmget', KEYS[1], 'owner', 'value', 'term', 'client')
if not found[1] then
    return nil
end
return {found[1], found[2] or '', tonumber(found[3]) or 0, found[4] or '',
    redis.call('pttl', KEYS[1])}
