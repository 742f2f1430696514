# An unlock for an idle client relayed soon (asyncio source of tests/_sync/test_relay_poll.py).
"""An unlock sent to a client whose waiters have all left is passed on at once: while its
subscription lingers with no waiter, its janitor reads what came every few milliseconds
(tenure.core.listening, "Relaying"), so the next client's waiter does not sleep with the
lock free until the releaser's back-up look (0.1 s, core/lock.py WAKE_CHECK_GRACE)."""

from __future__ import annotations

import time

from support.twins import AsyncEvent, async_sleep, async_spawn, async_wait_until
from tenure import keys


async def test_an_unlock_for_an_idle_client_reaches_the_next_waiter_soon(
    async_make_client, r
) -> None:
    name = "relayed"
    queue = keys.lock_wake_queue(name)
    a, b, c = async_make_client(), async_make_client(), async_make_client()
    holder = a.lock(name)
    assert await holder.acquire()
    # C waits briefly and gives up: registered first in the queue, its subscription
    # lingers (0.5 s) with nobody of it waiting, nobody reading its socket.
    assert not await c.lock(name).acquire(timeout=0.05)
    assert [m.decode() for m in r.zrange(queue, 0, -1)] == [c.client_id]
    got, got_at = AsyncEvent(), []

    async def wait() -> None:
        lock = b.lock(name)
        assert await lock.acquire(timeout=10)
        got_at.append(time.monotonic())
        got.set()
        await lock.release()

    job = async_spawn(wait)
    assert await async_wait_until(lambda: r.zcard(queue) == 2)
    # The unlock goes to the oldest live client: C, which has nobody to give it to.
    assert [m.decode() for m in r.zrange(queue, 0, -1)] == [c.client_id, b.client_id]
    await async_sleep(0.02)  # B's waiter asleep on its channel
    await holder.release()  # and A does not take the lock again
    released = time.monotonic()
    assert await got.wait(5)
    await job.result(10)
    waited = got_at[0] - released
    assert waited < 0.05, f"B held the lock {waited * 1e3:.1f} ms after A's release"
    # C passed the unlock on (lock_wake.lua takes it out of the queue).
    assert c.client_id not in [m.decode() for m in r.zrange(queue, 0, -1)]
