# GENERATED from tests/_async/test_fair_woken_head.py by tools/unasync.py: edit that file, not this one.
"""A waiter that arrives at a free FairLock behind a dead head drops it and wakes the next
head (scripts/fair_acquire.lua, as Redisson's acquire does), then joins behind it. No turn
watcher follows that wake-up (a release starts one: tenure.core.fair, watch_turn): if that
head is gone too, the waiter must still be served once the head's turn (one renewal period)
has passed, not at a renewal pass of its client later."""

from __future__ import annotations

import time

from support.twins import sleep
from support.wire import server_ms
from tenure import keys


def test_a_waiter_that_woke_a_new_head_looks_again_when_its_turn_ends(
    make_client, r
) -> None:
    # Redisson's queue: a dead head, then a Java waiter whose process was killed (its score
    # still runs: the head's turn cuts it to the grace, 1 s with a 3 s watchdog).
    name = "woken-head"
    now = server_ms(r)
    r.rpush(keys.fair_queue_key(name), "dead:1", "gone:1")
    r.zadd(keys.fair_timeout_key(name), {"dead:1": now - 1, "gone:1": now + 60_000})
    client = make_client(watchdog_timeout=3)
    # The renewal passes (every second here) start with a hold: one 0.1 s before the wait,
    # so the pass due as the head's turn ends comes just before it (the next: 1 s later).
    other = client.lock("woken-head-phase")
    assert other.acquire()
    sleep(0.1)
    lock = client.fair_lock(name)
    began = time.monotonic()
    assert lock.acquire(timeout=10)
    took = time.monotonic() - began
    lock.release()
    other.release()
    assert r.lrange(keys.fair_queue_key(name), 0, -1) == []
    assert took < 1.5, f"served {took:.3f} s after it came (the gone head's turn: 1 s)"
