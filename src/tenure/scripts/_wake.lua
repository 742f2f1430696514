-- Targeted wake-ups for a Lock (tenure's addition; Redisson's channel is unchanged).
-- Each tenure client waiting on the lock listens on the lock's channel and on its own client
-- channel (<prefix><client uuid>), and is registered in the wake queue (a ZSET, oldest first)
-- by its waiting attempts. An unlock then wakes one client instead of all, unless someone
-- else listens on the lock's channel (a Redisson waiter, a client not registered yet): then
-- the unlock goes to the channel, as Redisson's does, and every listener hears it.
--
-- (Include _wake_register.lua before this fragment.)
--
-- wake_one(queue, channel, prefix, message, skip, idle): publish `message` to the client
-- channel of the oldest live registered client (not `skip`), moved to the back of the queue,
-- when every listener of `channel` (less `idle` known not to wait: the releaser's own
-- lingering subscription) is such a client; else to `channel`. Clients whose client
-- channel nobody listens on are dropped. Returns the client woken, or false and the number
-- of listeners the channel message reached.
local function wake_one(queue, channel, prefix, message, skip, idle)
    local ids = redis.call('zrange', queue, 0, -1)
    local dead, chosen = {}, nil
    if #ids > 0 then
        local listeners = redis.call('pubsub', 'numsub', channel)[2] - (idle or 0)
        local live = 0
        for _, id in ipairs(ids) do
            if redis.call('pubsub', 'numsub', prefix .. id)[2] > 0 then
                live = live + 1
                if chosen == nil and id ~= skip then
                    chosen = id
                end
            else
                dead[#dead + 1] = id
            end
        end
        if listeners > live then
            chosen = nil
        end
    end
    -- The PUBLISH (which an ACL can refuse) before any write.
    local heard = redis.call('publish', chosen and prefix .. chosen or channel, message)
    for _, id in ipairs(dead) do
        redis.call('zrem', queue, id)
    end
    if chosen then
        redis.call('zrem', queue, chosen)
        register(queue, chosen)
        return chosen, heard
    end
    return false, heard
end
