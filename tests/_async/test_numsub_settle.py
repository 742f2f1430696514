# A lock channel's count settled after Valkey miscounts it (asyncio source of
# tests/_sync/test_numsub_settle.py).
"""Valkey 9.0-9.1 answer ``PUBSUB NUMSUB`` with an address for a channel whose subscriber
table is being resized, as with 8 subscribers grown one by one, until that channel's next
SUBSCRIBE or UNSUBSCRIBE (docs/wire.md, bench/numsub_probe.py). A release that reads such a
count wakes every client, and its client then settles the count: the next unlock wakes one
client again. On Redis the count is right throughout."""

from __future__ import annotations

import time

import redis

from support.twins import AsyncEvent, async_sleep, async_spawn, async_wait_until
from tenure import keys

UNSURE = 65536
"""No true count reaches it; every miscount does (docs/wire.md)."""


def listening(r: redis.Redis, name: str) -> int:
    return int(r.pubsub_numsub(keys.lock_channel(name))[0][1])


def miscounted(r: redis.Redis, name: str) -> bool:
    return listening(r, name) >= UNSURE


def messages_within(pubsub, seconds: float) -> list[str]:
    """The channels of the unlocks heard for ``seconds`` (not the lease ends, ``-<ms>``,
    that wake nobody)."""
    got, end = [], time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        message = pubsub.get_message(timeout=left)
        if message and message["type"] == "pmessage":
            channel = message["channel"].decode()
            if keys.renewed_lease(message["data"].decode(), channel) is None:
                got.append(channel)
    return got


async def test_a_miscounted_lock_channel_is_settled_and_one_client_woken_again(
    async_make_client, r
) -> None:
    # 8 clients, two waiters each: a client whose waiter takes the lock still listens (its
    # other waiter), so the channel keeps its 8 subscribers, grown one by one.
    name = "settled"
    holder = async_make_client().lock(name)
    assert await holder.acquire()
    clients = [async_make_client() for _ in range(8)]
    got = [AsyncEvent() for _ in range(16)]
    let_go = [AsyncEvent() for _ in range(16)]

    async def wait(i: int) -> None:
        lock = clients[i // 2].lock(name)
        assert await lock.acquire(timeout=30)
        got[i].set()
        await let_go[i].wait(30)
        await lock.release()

    jobs = [async_spawn(wait, i) for i in range(16)]
    spy = r.pubsub()
    spy.psubscribe(keys.lock_channel(name) + "*")  # a pattern: not one of the channel's count
    try:
        assert await async_wait_until(lambda: r.zcard(keys.lock_wake_queue(name)) == 8)
        assert await async_wait_until(lambda: listening(r, name) in (8,) or miscounted(r, name))
        was_miscounted = miscounted(r, name)  # Valkey 9.0-9.1
        await holder.release()
        assert await async_wait_until(lambda: sum(e.is_set() for e in got) == 1, 5)
        # The releaser settled the count; nobody left the channel.
        assert await async_wait_until(lambda: listening(r, name) == 8, 5), listening(r, name)
        seen = messages_within(spy, 0.2)
        if was_miscounted:
            assert keys.lock_channel(name) in seen  # that unlock went to everyone
        # The releaser's back-up look (0.1 s after its release) is due: let it run now, while
        # the lock is held (asyncio: the blocking reads above held the event loop). Run
        # between the next release and its grant, it would find the lock free and send the
        # unlock to the lock's channel (519a367), which is what the next check looks for.
        await async_sleep(0.05)
        first = next(i for i, e in enumerate(got) if e.is_set())
        let_go[first].set()
        assert await async_wait_until(lambda: sum(e.is_set() for e in got) == 2, 5)
        seen = messages_within(spy, 0.3)
        # The next unlock went to one client's own channel, not to everyone (the back-up
        # look of the first targeted unlock may add one more such message).
        assert keys.lock_channel(name) not in seen, seen
        assert any(":tenure:" in channel for channel in seen), seen
    finally:
        spy.close()
        for e in let_go:
            e.set()
        for job in jobs:
            await job.result(10)
