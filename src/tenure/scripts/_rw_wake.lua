-- One wake-up per unlock for a ReadWriteLock (tenure's addition beside Redisson's layout,
-- docs/wire.md): the Lock's wake queue and client channels (_wake.lua) serve the write
-- side's waiters. A writer that waits registers its client (rw_write_acquire.lua); an
-- unlock that frees the lock then wakes one client, unless someone else listens on the
-- lock's channel (a Redisson waiter, a tenure reader whose client is not registered).
-- Readers share: every waiting reader must get in after a write unlock, in whatever client
-- it waits. So a reader refused within a wait puts READERS in the queue
-- (rw_read_acquire.lua), and while READERS is there the unlock goes to the channel, where
-- every listener hears it, whichever clients are registered.
--
-- (Include _wake_register.lua and _wake.lua before this fragment.)
--
-- rw_wake(queue, channel, message, idle, releaser): as wake_one (no `skip`); READERS in the
-- queue sends the unlock to the channel and leaves the queue (a reader refused later puts
-- it back). Returns what wake_one returns.
-- rw_freed(woken, heard, unsure, releaser): a release script's reply for a freed lock, as
-- lock_release.lua's: -1 (woke the releaser's own client alone), -2 (one other client
-- alone), else 1 + the listeners the channel message reached (a string when that count
-- could not be true). `releaser`: the releasing owner's reader field, <client uuid>:<n>.
-- (rw_read_acquire.lua writes the word itself: it needs none of these functions.)
local READERS = 'readers'

local function rw_wake(queue, channel, message, idle, releaser)
    if redis.call('zscore', queue, READERS) then
        -- The PUBLISH (which an ACL can refuse) before any write.
        local heard = redis.call('publish', channel, message)
        redis.call('zrem', queue, READERS)
        return false, heard, false
    end
    return wake_one(queue, channel, message, false, idle, releaser)
end

local function rw_freed(woken, heard, unsure, releaser)
    if woken then
        return woken == client_of(releaser) and -1 or -2
    end
    if unsure then
        return tostring(1 + heard)
    end
    return 1 + heard
end
