# The shared pub/sub connection (asyncio source of tests/_sync/test_pubsub.py).
"""The shared pub/sub connection: one per client, resubscribed after a reconnect."""

from __future__ import annotations

from functools import partial

from support.twins import AsyncEvent, async_spawn, async_wait_until
from support.wire import pubsub_clients


async def test_many_waiters_share_one_connection(async_make_client, r):
    holder = async_make_client().lock("shared")
    await holder.acquire()
    client = async_make_client()
    names = ["shared", "other"]
    await async_make_client().lock("other").acquire()
    acquired = []

    async def take(name: str) -> None:
        lock = client.lock(name)
        if await lock.acquire(timeout=10):
            acquired.append(name)
            await lock.release()

    jobs = [async_spawn(partial(take, names[i % 2])) for i in range(20)]
    assert await async_wait_until(lambda: len(r.pubsub_channels()) == 2, 5, 0.02)
    assert pubsub_clients(r) == 1
    await holder.force_release()
    await async_make_client().lock("other").force_release()
    for job in jobs:
        await job.join(20)
    assert sorted(acquired) == sorted(names * 10)  # every waiter had its turn


async def test_waiter_survives_pubsub_reconnect(async_make_client, r):
    holder = async_make_client().lock("re")
    await holder.acquire()  # 30 s lease: only an unlock message can wake the waiter soon
    waiter = async_make_client().lock("re")
    got = AsyncEvent()

    async def wait() -> None:
        if await waiter.acquire(timeout=20):
            got.set()
            await waiter.release()  # the owner is this caller

    job = async_spawn(wait)
    channel = [b"redisson_lock__channel:{re}"]
    assert await async_wait_until(lambda: r.pubsub_channels() == channel, 5, 0.02)
    assert r.client_kill_filter(_type="pubsub") >= 1
    assert await async_wait_until(
        lambda: r.pubsub_channels() == channel and pubsub_clients(r) == 1, 5, 0.02
    )
    await holder.release()
    assert await got.wait(2), "the waiter missed the unlock after its listener reconnected"
    await job.result()
