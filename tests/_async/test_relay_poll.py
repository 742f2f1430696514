# Unlocks for an idle client relayed soon (asyncio source of tests/_sync/test_relay_poll.py).
"""An unlock sent to a client whose waiters have all left is passed on at once: while its
subscription lingers with no waiter, its janitor reads what came every few milliseconds
(tenure.core.listening, "Relaying": `RELAY_POLL`), so the next client's waiter does not
sleep with the lock free until the releaser's back-up look (0.1 s, core/lock.py
WAKE_CHECK_GRACE). While another waiter of the client reads that socket, those reads are
useless (the reader passes on whatever comes): the janitor skips them, and the reader wakes
it when it lets go of the socket with nobody to take it over.

Each step waits for the state the next one needs (a waiter registered, asleep, reading),
never for a time; and the releaser's back-up look is left out (`no_look()`), so a relay is
told from the look by a margin no loaded machine closes (50 ms bounds against a 0.1 s look
failed 3 times in 120 runs beside two CPU hogs)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from support.parking import waiting
from support.twins import AsyncEvent, async_sleep, async_spawn, async_wait_until
from tenure import keys
from tenure.core import lock as lock_core
from tenure.core.lock import LockCore

LINGER = 5.0
"""How long a given-up waiter's channel lingers here (core/listening.py LINGER, 0.5 s in
use: on a loaded machine it could be let go before the test's next steps)."""
RELAYED = 1.0
"""A wait this short was ended by the relay (its reads: every 5 ms): with no back-up look,
an unlock nobody relays reaches the next waiter at the holder's lease end only (30 s)."""


@pytest.fixture(autouse=True)
def no_look(monkeypatch) -> None:
    """The releaser's back-up look (core/lock.py WAKE_CHECK_GRACE, 0.1 s after its unlock)
    left out: it would hand the lock on if nobody relayed, and a loaded machine blurs 0.1 s
    against a relay's few milliseconds. (The flow of looks ends at once instead of
    lingering, WAKE_CHECK_LINGER, which the client's close would wait for.)"""

    def skipped(self):
        yield from ()

    monkeypatch.setattr(LockCore, "_wake_check", skipped)
    monkeypatch.setattr(lock_core, "WAKE_CHECK_LINGER", 0.0)


async def give_up(r, client, name: str) -> None:
    """A waiter of ``client`` waits briefly on ``name`` and gives up, once registered in the
    lock's wake queue: its client's subscription lingers with nobody of it waiting, here
    `LINGER` seconds. (A first attempt slower than the wait gives up before it subscribes,
    registering nothing: it waits again.)"""
    queue = keys.lock_wake_queue(name)
    for _ in range(50):
        assert not await client.lock(name).acquire(timeout=0.05)
        if r.zscore(queue, client.client_id) is not None:
            for listener in client._runner._listener._by_node.values():
                listener._parking.linger = LINGER  # read at each look: this channel's too
            return
    raise AssertionError(f"{client.client_id} never registered in {queue}")


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
    assert await async_wait_until(lambda: waiting(b) == 1, 10)  # B's waiter asleep
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
    # lingers (`LINGER`) with nobody of it waiting, nobody reading its socket.
    await give_up(r, c, name)
    assert [m.decode() for m in r.zrange(queue, 0, -1)] == [c.client_id]
    waited = await relayed_wait(r, queue, holder, b, c)
    assert waited < RELAYED, f"B held the lock {waited:.3f} s after A's release"


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


async def test_the_janitor_does_not_read_while_a_waiter_reads(async_make_client, r) -> None:
    holder, c = async_make_client(), async_make_client()
    assert await holder.lock("hw-given-up").acquire()
    held = holder.lock("hw-read")
    assert await held.acquire()
    # A waiter of C gives up: its channel lingers (`LINGER`) with nobody of C waiting there.
    await give_up(r, c, "hw-given-up")
    looks = _count_looks(c)
    # Another waiter of C reads the socket for 0.3 s, then takes the lock (its leave, with
    # the lock, does not wake the janitor: tenure.core.listening.Listening.left()).
    reader = async_spawn(lambda: c.lock("hw-read").acquire(timeout=10))
    assert await async_wait_until(lambda: waiting(c) == 1, 10)
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
    assert await async_wait_until(lambda: len(looks) - before >= 3, 0.4), (
        "the janitor did not read again after the reader left"
    )


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
    assert await async_wait_until(lambda: waiting(c) == 1, 10)
    await give_up(r, c, name)
    assert [m.decode() for m in r.zrange(queue, 0, -1)] == [c.client_id]
    # The reader takes its lock and lets go of the socket: nobody of C reads it now.
    await other.release()
    assert await reader.result(10) is True
    waited = await relayed_wait(r, queue, holder, b, c)
    # Within a few relay reads (5 ms each): no back-up look hands the lock on here.
    assert waited < RELAYED, f"B held the lock {waited:.3f} s after A's release"
