# Cancelling a waiting semaphore acquire (asyncio source of tests/_sync/test_semaphore_cancel.py).
"""A plain Semaphore's acquire cancelled while it waits (``tenure/_settle.py``): the caller
gets the cancellation at once, and no permit is taken for nobody: the permit released next
stays free for whoever asks. asyncio only: a thread's wait cannot be cancelled from outside
(the sync twin skips)."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from support.twins import async_sleep, async_spawn, async_wait_until
from support.wire import numsub
from tenure import keys


async def test_a_waiting_semaphore_acquire_cancelled_takes_no_permit(async_make_client, r):
    client = async_make_client()
    if not inspect.iscoroutinefunction(client.close):
        pytest.skip("a thread's wait cannot be cancelled from outside (asyncio only)")
    holder = async_make_client().semaphore("cancelled-wait")
    assert await holder.try_set_permits(1)
    assert await holder.acquire()
    channel = keys.semaphore_channel("cancelled-wait")
    job = async_spawn(lambda: client.semaphore("cancelled-wait").acquire(timeout=30))
    assert await async_wait_until(lambda: numsub(r, channel) >= 1, 5)  # waiting
    assert hasattr(job, "task")  # an asyncio job (the skip above)
    job.task.cancel()
    assert isinstance(await job.outcome(5), asyncio.CancelledError)
    await holder.release()
    await async_sleep(0.3)  # time enough for a waiter left behind to take it
    assert await holder.available_permits() == 1
    assert await client.semaphore("cancelled-wait").acquire(blocking=False)
    assert await holder.available_permits() == 0
