-- Registration in a Lock's wake queue (tenure's addition; see _wake.lua, which needs this
-- fragment included before it).
-- register(queue, id): put client `id` at the back of the queue unless it is in it already;
-- if it is, as put back by its own release only (a score with a half: see _wake.lua), it is
-- seen waiting now: the half goes, the place stays.
local QUEUE_MS = 600000 -- idle queues go; a lost queue only wakes all
local function register(queue, id)
    local score = tonumber(redis.call('zscore', queue, id))
    if score then
        if score % 1 ~= 0 then
            redis.call('zadd', queue, math.floor(score), id)
        end
        return
    end
    local last = redis.call('zrange', queue, -1, -1, 'withscores')
    redis.call('zadd', queue, math.floor(tonumber(last[2]) or 0) + 1, id)
    redis.call('pexpire', queue, QUEUE_MS)
end
