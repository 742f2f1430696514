"""Plain Semaphore permits taken by an acquire whose caller stopped waiting come back
(issue 23 item 7): asyncio acquires cancelled at random points around their grant, while
another client takes and gives back every permit. asyncio only: a thread cannot be
cancelled (tests/_sync has no twin)."""

from __future__ import annotations

import asyncio
import random

import pytest

from support.twins import async_wait_until

PERMITS = 2
ROUNDS = 200


BUSY = """
local t = redis.call('TIME')
local start = t[1] * 1000000 + t[2]
repeat
    t = redis.call('TIME')
until t[1] * 1000000 + t[2] - start > tonumber(ARGV[1]) * 1000
return 1
"""
"""Keeps the server busy for ARGV[1] ms: a script sent meanwhile waits, in flight."""


async def test_acquire_cancelled_with_its_script_in_flight_gives_the_permits_back(
    async_make_client, r
):
    """The caller is cancelled while its acquire script waits behind another one: the
    script then runs and takes the permits; the reply, read after the cancellation, gives
    them back (before: the connection was dropped, the reply lost, the permits kept)."""
    name = "in-flight"
    sem = async_make_client().semaphore(name)
    await sem.set_permits(PERMITS)
    assert await sem.acquire(2, blocking=False)  # the script is cached: EVALSHA runs it
    await sem.release(2)
    busy = asyncio.create_task(asyncio.to_thread(r.eval, BUSY, 0, 300))
    await asyncio.sleep(0.05)  # the server is running the busy script
    task = asyncio.create_task(sem.acquire(2))
    await asyncio.sleep(0.05)  # its script is sent, behind the busy one
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await busy == 1
    assert await async_wait_until(lambda: r.get(name) == str(PERMITS).encode(), 0.5, 0.01), (
        f"{r.get(name)!r} of {PERMITS} permits available"
    )


async def test_cancelled_acquires_leave_every_permit(async_make_client, r):
    """200 acquires cancelled 0-3 ms after they start, while another client takes and
    releases all permits in a loop: once the dust settles (0.5 s), all permits are back."""
    name = "cancelled-permits"
    holder = async_make_client().semaphore(name)
    sem = async_make_client().semaphore(name)
    await sem.set_permits(PERMITS)
    stop = asyncio.Event()

    async def hold() -> None:
        while not stop.is_set():
            if await holder.acquire(PERMITS, timeout=1):  # all of them: the others wait
                await asyncio.sleep(random.uniform(0.002, 0.005))
                await holder.release(PERMITS)
            await asyncio.sleep(0)

    holding = asyncio.create_task(hold())
    rng = random.Random(23)
    granted = cancelled = 0
    for _ in range(ROUNDS):
        task = asyncio.create_task(sem.acquire(timeout=5))
        await asyncio.sleep(rng.uniform(0, 0.003))
        task.cancel()
        try:
            if await task:
                granted += 1  # finished before the cancellation landed: ours to give back
                await sem.release()
        except asyncio.CancelledError:
            cancelled += 1
    stop.set()
    await holding
    assert cancelled > ROUNDS // 10, (granted, cancelled)  # most land while it waits
    assert await async_wait_until(lambda: r.get(name) == str(PERMITS).encode(), 0.5, 0.01), (
        f"{r.get(name)!r} of {PERMITS} permits available after {cancelled} cancellations"
    )
