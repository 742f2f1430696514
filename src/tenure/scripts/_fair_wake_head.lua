-- wake_head(queue, zset, prefix, message, moved): a fair lock is about to become free and
-- the caller is about to move every deadline by `moved` ms (see fair_shift). Wake the first
-- live head (it may take the lock) and the one behind it (the head's deadline just moved
-- ahead, so its wait did too), then drop the heads before it that missed their deadline
-- (dead or gone). The PUBLISHes (which an ACL can refuse) come first: a refused one changes
-- nothing. Channels are not keys: a waiter's channel is prefix .. owner, the prefix an
-- argument. Needs the server_time fragment.
local function wake_head(queue, zset, prefix, message, moved)
    local now = now_ms()
    local dead = {}
    local head = redis.call('lindex', queue, 0)
    while head do
        local deadline = redis.call('zscore', zset, head)
        if deadline and tonumber(deadline) + moved > now then
            redis.call('publish', prefix .. head, message)
            local next = redis.call('lindex', queue, #dead + 1)
            if next then
                redis.call('publish', prefix .. next, message)
            end
            break
        end
        dead[#dead + 1] = head
        head = redis.call('lindex', queue, #dead)
    end
    for _, waiter in ipairs(dead) do
        redis.call('lpop', queue)
        redis.call('zrem', zset, waiter)
    end
end
