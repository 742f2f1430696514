-- wake_head(queue, zset, prefix, message): a fair lock just became free. Drop queue heads that
-- missed their deadline (dead or gone), then wake the live head (it may take the lock) and
-- the one behind it (the head's deadline just moved ahead, so its wait did too).
-- Channels are not keys: a waiter's channel is prefix .. owner, the prefix an argument.
-- Needs the server_time fragment.
local function wake_head(queue, zset, prefix, message)
    local now = now_ms()
    local head = redis.call('lindex', queue, 0)
    while head do
        local deadline = redis.call('zscore', zset, head)
        if deadline and tonumber(deadline) > now then
            redis.call('publish', prefix .. head, message)
            local next = redis.call('lindex', queue, 1)
            if next then
                redis.call('publish', prefix .. next, message)
            end
            return
        end
        redis.call('lpop', queue)
        redis.call('zrem', zset, head)
        head = redis.call('lindex', queue, 0)
    end
end
