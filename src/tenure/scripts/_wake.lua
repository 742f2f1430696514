-- Targeted wake-ups for a Lock (tenure's addition; Redisson's channel is unchanged).
-- Each tenure client waiting on the lock listens on the lock's channel and on its own client
-- channel (<channel>:tenure:<client uuid>, keys.lock_client_channel()), and is registered in
-- the wake queue (a ZSET, oldest first) by its waiting attempts. An unlock then wakes one
-- client instead of all, unless someone else listens on the lock's channel (a Redisson
-- waiter, a client not registered yet): then the unlock goes to the channel, as Redisson's
-- does, and every listener hears it.
--
-- (Include _wake_register.lua before this fragment.)
--
-- client_of(owner): the client uuid of an owner field, <client uuid>:<number>
-- (keys.owner_field); nil for a field of another form.
--
-- wake_one(queue, channel, message, skip, idle, releaser): publish `message` to the client
-- channel of the oldest live registered client (not `skip`), moved to the back of the
-- queue, when every listener of `channel` (less `idle` known not to wait: the releaser's own
-- lingering subscription) is such a client; else to `channel`. Clients whose client channel
-- nobody listens on are dropped. With `idle` (1) and `releaser`, the releaser's client has no
-- waiter: it is neither woken nor counted live, even while the server still counts its
-- client channel (its UNSUBSCRIBE, sent at its grant, may still be on its way: a release
-- right after a grant would else wake its own client, which passes the wake-up on, one
-- round trip later). `releaser` (optional): the owner field of a release, whose
-- client is put at the back of the queue, after the one woken, when the unlock reached
-- someone (the lock is contended) and that client is not a live registered client already
-- (or is one with no waiter: `idle`, or `skip`, at the end of its lingering).
-- Its client is named only then (lock_release.lua frees an uncontended lock before it
-- includes this fragment). One PUBSUB NUMSUB counts every listener at once.
-- A client put (back) in the queue by its own release alone has a score with a half: not
-- seen waiting since (it may have gone idle, its subscriptions lingering: a wake-up sent to
-- it waits until it next reads its socket to be passed on). wake_one wakes the oldest live
-- client without a half, and one with a half only when there is none; a refused attempt
-- (register) takes the half off. (A release that woke a client and then went idle left its
-- client to be woken next as a waiter: 65-101 ms with the lock free, reviewer R2's probe.)
-- Likewise a half stays on a client an unlock chose for want of one without (moved to the
-- back with its half), and an idle releaser that stays in its place gets one (else either
-- was woken next, idle, before a waiter: 101 ms, reviewer R3).
-- Returns the client woken, or false and the number of listeners the channel message reached;
-- then true when the count of `channel` could not be true (UNSURE_COUNT).
--
-- UNSURE_COUNT: Valkey 9.0-9.1 answer PUBSUB NUMSUB with a memory address (64 Ki or more)
-- for a channel whose subscriber table is being resized, until that channel's next
-- SUBSCRIBE or UNSUBSCRIBE (docs/wire.md). Such a count exceeds `live`, so the unlock goes
-- to `channel` (safe); the caller then has the table settled (core.effects.Settle).
local UNSURE_COUNT = 65536

local function client_of(owner)
    return string.match(owner, '^(.*):')
end

-- put_back(queue, releaser): put the client of owner field `releaser` behind an empty
-- queue (the unlock went to the lock's channel and reached someone: the lock is contended).
local function put_back(queue, releaser)
    local back = client_of(releaser)
    if back then
        redis.call('zadd', queue, 2.5, back) -- as in wake_one, behind an empty queue
        redis.call('pexpire', queue, QUEUE_MS)
    end
end

local function wake_one(queue, channel, message, skip, idle, releaser)
    local entries = redis.call('zrange', queue, 0, -1, 'withscores')
    if #entries == 0 then -- nobody registered: the channel
        local heard = redis.call('publish', channel, message)
        if releaser and heard > (idle or 0) then
            put_back(queue, releaser)
        end
        return false, heard
    end
    local prefix = channel .. ':tenure:'
    local dead, chosen, last, placed, back, unsure = {}, nil, 0, false, nil, false
    local idle_back = false -- the releaser's client is in the queue with no waiter
    local own_score, chosen_half = nil, false
    if #entries > 0 then
        back = releaser and client_of(releaser)
        last = math.floor(tonumber(entries[#entries]))
        local names = {channel}
        for i = 1, #entries, 2 do
            names[#names + 1] = prefix .. entries[i]
        end
        local counts = {}
        for first = 1, #names, 512 do -- unpack() has a stack limit: a few hundred at a time
            local reply = redis.call('pubsub', 'numsub', unpack(names, first, math.min(first + 511, #names)))
            for i = 2, #reply, 2 do
                counts[#counts + 1] = tonumber(reply[i])
            end
        end
        unsure = counts[1] >= UNSURE_COUNT
        local listeners = counts[1] - (idle or 0)
        local own = (idle or 0) > 0 and back -- the idle releaser's client (see above)
        local live, put_back_only = 0, nil
        for i = 1, #entries, 2 do
            local id = entries[i]
            local count = counts[(i + 1) / 2 + 1]
            if id == own and count > 0 then -- neither live nor gone (and, if the unlock
                -- reached someone, put at the back below, as any releaser)
                idle_back = true
                own_score = tonumber(entries[i + 1])
            elseif count > 0 then
                live = live + 1
                placed = placed or id == back
                idle_back = idle_back or (id == back and id == skip)
                if id ~= skip then
                    if tonumber(entries[i + 1]) % 1 == 0 then
                        chosen = chosen or id
                    else
                        put_back_only = put_back_only or id
                    end
                end
            else
                dead[#dead + 1] = id
            end
        end
        if chosen == nil and put_back_only then
            chosen, chosen_half = put_back_only, true
        end
        if listeners > live then
            chosen = nil
        end
    end
    -- The PUBLISH (which an ACL can refuse) before any write.
    local heard = redis.call('publish', chosen and prefix .. chosen or channel, message)
    for first = 1, #dead, 512 do
        redis.call('zrem', queue, unpack(dead, first, math.min(first + 511, #dead)))
    end
    local moved = {}
    if chosen then -- (one not seen waiting keeps its half: it may be idle still)
        moved = {last + (chosen_half and 1.5 or 1), chosen}
    end
    if releaser and (idle_back or not placed) and (chosen or heard > (idle or 0)) then
        -- (At the back with a half: seen waiting only once an attempt of it is refused.)
        back = back or client_of(releaser)
        if back and back ~= chosen then
            moved[#moved + 1] = last + 2.5
            moved[#moved + 1] = back
        end
    elseif own_score and own_score % 1 == 0 then
        -- The idle releaser stays in its place, but not as a waiter: it is not one now.
        moved[#moved + 1] = own_score + 0.5
        moved[#moved + 1] = back
    end
    if #moved > 0 then
        redis.call('zadd', queue, unpack(moved))
        redis.call('pexpire', queue, QUEUE_MS)
    end
    if chosen then
        return chosen, heard, false
    end
    return false, heard, unsure
end
