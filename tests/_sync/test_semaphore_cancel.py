# GENERATED from tests/_async/test_semaphore_cancel.py by tools/unasync.py: edit that file, not this one.
"""A plain Semaphore's acquire cancelled while it waits (``tenure/_settle.py``): the caller
gets the cancellation at once, and no permit is taken for nobody: the permit released next
stays free for whoever asks. asyncio only: a thread's wait cannot be cancelled from outside
(the sync twin skips)."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from support.twins import sleep, spawn, wait_until
from support.wire import numsub
from tenure import keys


def test_a_waiting_semaphore_acquire_cancelled_takes_no_permit(make_client, r):
    client = make_client()
    if not inspect.iscoroutinefunction(client.close):
        pytest.skip("a thread's wait cannot be cancelled from outside (asyncio only)")
    holder = make_client().semaphore("cancelled-wait")
    assert holder.try_set_permits(1)
    assert holder.acquire()
    channel = keys.semaphore_channel("cancelled-wait")
    job = spawn(lambda: client.semaphore("cancelled-wait").acquire(timeout=30))
    assert wait_until(lambda: numsub(r, channel) >= 1, 5)  # waiting
    assert hasattr(job, "task")  # an asyncio job (the skip above)
    job.task.cancel()
    assert isinstance(job.outcome(5), asyncio.CancelledError)
    holder.release()
    sleep(0.3)  # time enough for a waiter left behind to take it
    assert holder.available_permits() == 1
    assert client.semaphore("cancelled-wait").acquire(blocking=False)
    assert holder.available_permits() == 0
