-- Read-hold timeout keys, declared by the client (tenure.core.rwlock), which builds every key:
-- from ARGV[at] the number of readers declared, then per reader its hash field and a number
-- n; from KEYS[first], reader after reader in that order, the timeout keys of its holds 1..n.
-- A script may touch only keys it was given, so it first checks the declaration against the
-- hash, before changing anything.
-- declared_readers(hash, at, first, all, extra) returns a table field -> {KEYS index of hold 1,
-- the field's hold count in the hash (0 when absent)} when every declared reader's count
-- plus `extra` (the holds the script adds) is at most its n and, with `all`, every reader
-- field of the hash is declared. Else it returns nil and the reply to send back instead,
-- {'stale', field, count, ...} for every reader field of the hash; the client declares again.
-- A declared n above the count is fine (a release by another reader in between does not
-- make a declaration stale); the keys beyond the count are not touched.
-- Reader fields are all but 'mode' and writer fields (<owner>:write).
local function declared_readers(hash, at, first, all, extra)
    local declared = {}
    local ok = true
    local k = first
    for i = 1, tonumber(ARGV[at]) do
        local field = ARGV[at + 2 * i - 1]
        local n = tonumber(ARGV[at + 2 * i])
        local count = tonumber(redis.call('hget', hash, field)) or 0
        declared[field] = {k, count}
        k = k + n
        if count + extra > n then
            ok = false
        end
    end
    local readers = {}
    if all or not ok then
        local fields = redis.call('hgetall', hash)
        for i = 1, #fields, 2 do
            local field = fields[i]
            if field ~= 'mode' and string.sub(field, -6) ~= ':write' and tonumber(fields[i + 1]) then
                readers[#readers + 1] = field
                readers[#readers + 1] = fields[i + 1]
                if not declared[field] then
                    ok = false
                end
            end
        end
    end
    if ok then
        return declared
    end
    table.insert(readers, 1, 'stale')
    return nil, readers
end
