# GENERATED from tests/_async/test_relay_poll.py by tools/unasync.py: edit that file, not this one.
"""An unlock sent to a client whose waiters have all left is passed on at once: while its
subscription lingers with no waiter, its janitor reads what came every few milliseconds
(tenure.core.listening, "Relaying"), so the next client's waiter does not sleep with the
lock free until the releaser's back-up look (0.1 s, core/lock.py WAKE_CHECK_GRACE)."""

from __future__ import annotations

import time

from support.twins import Event, sleep, spawn, wait_until
from tenure import keys


def test_an_unlock_for_an_idle_client_reaches_the_next_waiter_soon(
    make_client, r
) -> None:
    name = "relayed"
    queue = keys.lock_wake_queue(name)
    a, b, c = make_client(), make_client(), make_client()
    holder = a.lock(name)
    assert holder.acquire()
    # C waits briefly and gives up: registered first in the queue, its subscription
    # lingers (0.5 s) with nobody of it waiting, nobody reading its socket.
    assert not c.lock(name).acquire(timeout=0.05)
    assert [m.decode() for m in r.zrange(queue, 0, -1)] == [c.client_id]
    got, got_at = Event(), []

    def wait() -> None:
        lock = b.lock(name)
        assert lock.acquire(timeout=10)
        got_at.append(time.monotonic())
        got.set()
        lock.release()

    job = spawn(wait)
    assert wait_until(lambda: r.zcard(queue) == 2)
    # The unlock goes to the oldest live client: C, which has nobody to give it to.
    assert [m.decode() for m in r.zrange(queue, 0, -1)] == [c.client_id, b.client_id]
    sleep(0.02)  # B's waiter asleep on its channel
    holder.release()  # and A does not take the lock again
    released = time.monotonic()
    assert got.wait(5)
    job.result(10)
    waited = got_at[0] - released
    assert waited < 0.05, f"B held the lock {waited * 1e3:.1f} ms after A's release"
    # C passed the unlock on (lock_wake.lua takes it out of the queue).
    assert c.client_id not in [m.decode() for m in r.zrange(queue, 0, -1)]
