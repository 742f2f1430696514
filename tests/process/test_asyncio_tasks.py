"""asyncio only: cancelling a waiting task (a thread cannot be cancelled, so these have no
sync twin in tests/_sync)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from support.twins import async_wait_until
from support.wire import shared_channels
from tenure import keys


async def own_task(call: Callable[[], Awaitable[bool]]) -> bool:
    return await call()


async def test_cancelled_waiter_leaves_nothing_held_or_subscribed(async_make_client, r):
    holder, client = async_make_client(), async_make_client()
    held = holder.lock("cancel")
    await held.acquire()
    waiter = asyncio.create_task(client.lock("cancel").acquire())
    channel = [b"redisson_lock__channel:{cancel}"]
    assert await async_wait_until(lambda: shared_channels(r) == channel)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await held.release()
    await async_wait_until(lambda: not r.pubsub_channels(), 5, 0.05)
    assert r.pubsub_channels() == []
    assert not r.exists("cancel")


async def test_a_cancelled_reader_leaves_the_socket_to_the_other_waiters(async_make_client, r):
    """The task reading the client's shared pub/sub socket is cancelled mid-read: the
    connection stays up (redis-py keeps a partial reply for the next read), the other
    waiter takes the socket over, and the unlock wakes it."""
    holder, client = async_make_client(), async_make_client()
    held = holder.lock("reader")
    await held.acquire()
    channel = keys.lock_channel("reader")
    first = asyncio.create_task(client.lock("reader").acquire())
    assert await async_wait_until(lambda: r.pubsub_numsub(channel)[0][1] == 1)
    listener = client._runner._listener._by_channel[channel]
    assert await async_wait_until(lambda: listener._table.reader is first)
    second = asyncio.create_task(client.lock("reader").acquire(timeout=20))
    assert await async_wait_until(lambda: len(listener._parking.channels[channel].tickets) == 2)
    connections = {c["id"] for c in r.client_list() if c["sub"] != "0"}
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    await held.release()
    assert await asyncio.wait_for(second, 5) is True
    assert {c["id"] for c in r.client_list() if c["sub"] != "0"} == connections


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


@pytest.mark.parametrize("kind", ["lock", "fair_lock", "fenced_lock", "read", "write"])
async def test_cancelled_at_every_await_point_leaves_no_hold(async_client, r, kind):
    """An acquire cancelled anywhere, its script perhaps already sent: 0 holds left 0.5 s
    later, and the task's next cycle frees the lock."""

    def lock_of(client):
        if kind in ("read", "write"):
            rw = client.read_write_lock("every-await")
            return rw.read_lock() if kind == "read" else rw.write_lock()
        return getattr(client, kind)("every-await")

    lock = lock_of(async_client)
    outcomes: list[bool] = []
    for steps in range(200):  # each run is cancelled after one more trip through the loop
        if outcomes and outcomes[-1]:
            break
        task = asyncio.create_task(own_task(lambda: lock.acquire()))
        for _ in range(steps):
            await asyncio.sleep(0)
        task.cancel()
        try:
            granted = await task
        except asyncio.CancelledError:
            granted = False
        outcomes.append(granted)
        if granted:  # it finished before the cancel landed (its owner, the task, ended)
            await lock.force_release()
        assert await async_wait_until(lambda: not r.exists("every-await"), 0.5, 0.01), steps
    # Cancelled at first, then at each later await point, until the acquire completed: every
    # point between was hit.
    assert outcomes[0] is False
    assert outcomes[-1] is True
