# The releaser's yield (asyncio source of tests/_sync/test_lock_yield.py).
"""After a release that woke another client, the releasing client yields to it for a few
ms (`tenure.core.lock.YIELD_GRACE`) before its next attempt. An acquire whose whole wait
fits in that yield still makes one attempt, as ``timeout=0`` does (reviewer R3, F4)."""

from __future__ import annotations

import pytest
import redis

from tenure import keys


@pytest.mark.parametrize("timeout", [1e-6, 1e-5])
async def test_a_wait_shorter_than_the_yield_still_tries_once(
    async_make_client, r: redis.Redis, timeout: float
) -> None:
    listener = r.pubsub()  # another listener (as a Redisson waiter): the unlock reaches it
    listener.subscribe(keys.lock_channel("tiny"))
    assert listener.get_message(timeout=2) is not None
    try:
        lock = async_make_client().lock("tiny")
        granted = 0
        for _ in range(10):
            assert await lock.acquire()
            await lock.release()  # it reached the listener: the client yields
            if await lock.acquire(timeout=timeout):  # the lock is free
                granted += 1
                await lock.release()
        assert granted == 10, granted
    finally:
        listener.close()
