"""asyncio only: cancelling a waiting task (a thread cannot be cancelled, so these have no
sync twin in tests/_sync)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from support.twins import async_wait_until
from tenure import keys


async def own_task(call: Callable[[], Awaitable[bool]]) -> bool:
    return await call()


async def test_cancelled_waiter_leaves_nothing_held_or_subscribed(async_make_client, r):
    holder, client = async_make_client(), async_make_client()
    held = holder.lock("cancel")
    await held.acquire()
    waiter = asyncio.create_task(client.lock("cancel").acquire())
    channel = [b"redisson_lock__channel:{cancel}"]
    assert await async_wait_until(lambda: r.pubsub_channels() == channel)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await held.release()
    await async_wait_until(lambda: not r.pubsub_channels(), 5, 0.05)
    assert r.pubsub_channels() == []
    assert not r.exists("cancel")


async def test_fair_cancelled_and_timed_out_waiters_leave_queue(async_client, r):
    lock = async_client.fair_lock("acancel")
    assert await lock.acquire(lease_time=10)
    queue = keys.fair_queue_key("acancel")
    # Each waiter calls acquire() inside its own task: the caller is the owner.
    waiter = asyncio.create_task(own_task(lambda: lock.acquire()))
    timed = asyncio.create_task(own_task(lambda: lock.acquire(timeout=0.3)))
    assert await async_wait_until(lambda: r.llen(queue) == 2)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert r.llen(queue) == 1
    assert await timed is False
    assert r.exists(queue, keys.fair_timeout_key("acancel")) == 0
    assert await lock.acquire(blocking=False)  # re-entry by the holder task
    assert await lock.hold_count() == 2
    await lock.release()
    await lock.release()
    assert not await lock.locked()
