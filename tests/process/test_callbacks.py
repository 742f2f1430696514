"""Threads only: a user callback that blocks does not stop the client's renewal loop (in
asyncio a blocking callback blocks the whole event loop, which the docs forbid)."""

from __future__ import annotations

import threading
import time


def test_slow_on_lost_does_not_delay_renewal_of_other_holds(make_client, r):
    """on_lost runs away from the renewal loop: were it run on the renewal thread, a 4 s
    callback would let the client's other holds expire and be taken."""
    client = make_client(watchdog_timeout=0.6)
    entered, unblock = threading.Event(), threading.Event()

    def slow(lock: object) -> None:
        entered.set()
        unblock.wait(10)

    victim, kept = client.lock("victim", on_lost=slow), client.lock("kept")
    assert victim.acquire()
    assert kept.acquire()
    try:
        r.delete("victim")  # the next renewal finds it gone
        assert entered.wait(3), "the loss was not reported"
        end = time.monotonic() + 1.8  # three renewal periods with the callback still blocked
        while time.monotonic() < end:
            assert r.pttl("kept") > 0, "the other hold was not renewed"
            time.sleep(0.05)
        assert victim.lost
        assert not kept.lost
    finally:
        unblock.set()
    kept.release()
