# Unlocks for an idle client relayed soon (asyncio source of tests/_sync/test_relay_poll.py).
"""An unlock sent to a client whose waiters have all left is passed on at once: while its
subscription lingers with no waiter, its janitor reads what came every few milliseconds
(tenure.core.listening, "Relaying": `RELAY_POLL`), so the next client's waiter does not
sleep with the lock free until the releaser's back-up look (0.1 s, core/lock.py
WAKE_CHECK_GRACE). While another waiter of the client reads that socket, those reads are
useless (the reader passes on whatever comes): the janitor skips them, and the reader wakes
it when it lets go of the socket with nobody to take it over."""

from __future__ import annotations

import time
from typing import Any

from support.twins import AsyncEvent, async_sleep, async_spawn, async_wait_until
from tenure import keys


async def relayed_wait(r, queue: str, holder, b, c) -> float:
    """C (nobody of it waiting, its subscription lingering) is first in ``queue``; B's
    waiter queues behind it and ``holder`` is released: seconds until B holds the lock,
    once C passed the unlock on (lock_wake.lua takes C out of the queue)."""
    name = holder.name
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
    assert c.client_id not in [m.decode() for m in r.zrange(queue, 0, -1)]
    return got_at[0] - released


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
    waited = await relayed_wait(r, queue, holder, b, c)
    assert waited < 0.05, f"B held the lock {waited * 1e3:.1f} ms after A's release"


def _count_looks(client: Any) -> list[float]:
    """When the janitor of ``client``'s one pub/sub connection plans its next look (once
    per wake-up, `tenure.core.listening.Listening.janitor_plan()`), from now on."""
    (listener,) = client._runner._listener._by_node.values()
    table = listener._table
    plan = table.janitor_plan
    looks: list[float] = []

    def counted() -> tuple[list[str], float]:
        looks.append(time.monotonic())
        return plan()

    table.janitor_plan = counted
    return looks


async def test_the_janitor_does_not_read_while_a_waiter_reads(async_make_client) -> None:
    holder, c = async_make_client(), async_make_client()
    assert await holder.lock("hw-given-up").acquire()
    held = holder.lock("hw-read")
    assert await held.acquire()
    # A waiter of C gives up: its channel lingers (0.5 s) with nobody of C waiting there.
    assert not await c.lock("hw-given-up").acquire(timeout=0.05)
    looks = _count_looks(c)
    # Another waiter of C reads the socket for 0.3 s, then takes the lock (its leave, with
    # the lock, does not wake the janitor: tenure.core.listening.Listening.left()).
    reader = async_spawn(lambda: c.lock("hw-read").acquire(timeout=10))
    started = time.monotonic()
    await async_sleep(0.3)
    ended = time.monotonic()
    await held.release()
    assert await reader.result(10) is True
    # (Its subscription and first attempt may wake the janitor at the start.)
    during = [t for t in looks if started + 0.05 < t < ended]
    assert len(during) <= 2, f"the janitor looked {len(during)} times while a waiter read"
    # Once that waiter let go of the socket, the janitor reads every few ms again.
    before = len(looks)
    await async_sleep(0.05)
    assert len(looks) - before >= 3, "the janitor did not read again after the reader left"


async def test_an_unlock_for_a_client_whose_reader_left_reaches_the_next_waiter_soon(
    async_make_client, r
) -> None:
    name = "hw-relayed"
    queue = keys.lock_wake_queue(name)
    a, b, c = async_make_client(), async_make_client(), async_make_client()
    holder = a.lock(name)
    assert await holder.acquire()
    other = a.lock("hw-other")
    assert await other.acquire()
    # A waiter of C reads C's socket (waiting on another lock) while a second waiter of C
    # gives up on `name`: registered first in the queue, its subscription lingers.
    reader = async_spawn(lambda: c.lock("hw-other").acquire(timeout=10))
    await async_sleep(0.02)
    assert not await c.lock(name).acquire(timeout=0.05)
    assert [m.decode() for m in r.zrange(queue, 0, -1)] == [c.client_id]
    # The reader takes its lock and lets go of the socket: nobody of C reads it now.
    await other.release()
    assert await reader.result(10) is True
    waited = await relayed_wait(r, queue, holder, b, c)
    # Within a few relay reads (5 ms each), well before the releaser's back-up look (0.1 s,
    # core/lock.py WAKE_CHECK_GRACE) that would hand the lock on if nobody relayed.
    assert waited < 0.075, f"B held the lock {waited * 1e3:.1f} ms after A's release"
