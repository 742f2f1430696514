-- Registration in a Lock's wake queue (tenure's addition; see _wake.lua, which needs this
-- fragment included before it).
-- register(queue, id): put client `id` at the back of the queue unless it is in it already.
local QUEUE_MS = 600000 -- idle queues go; a lost queue only wakes all
local function register(queue, id)
    if redis.call('zscore', queue, id) then
        return
    end
    local last = redis.call('zrange', queue, -1, -1, 'withscores')
    redis.call('zadd', queue, (tonumber(last[2]) or 0) + 1, id)
    redis.call('pexpire', queue, QUEUE_MS)
end
