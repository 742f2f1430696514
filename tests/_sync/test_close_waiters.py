# GENERATED from tests/_async/test_close_waiters.py by tools/unasync.py: edit that file, not this one.
"""A client closed while some of its callers wait in a queue (a FairLock's, an election's
candidates): ``close()`` wakes them, and each leaves its queue before the client stops
sending (``Runner.close``). Its entry left behind made the next live waiter wait:
a FairLock's queue stalled until the entry ran out (10 s, ``watchdog_timeout / 3``), and
the closed client's candidate was elected when the leader resigned, its live rival waiting
for that leadership's whole lease."""

from __future__ import annotations

import math
import threading
import time

from support.twins import spawn, wait_until
from support.wire import queue_of
from tenure.core.election import election_keys
from tenure.errors import ClientClosedError

LATE = 2.0
"""Seconds within which the live waiter must get its turn (a stalled queue takes 10 s or
more: the entry's life, or a lease)."""


def test_a_closed_clients_fair_waiter_leaves_the_queue(make_client, r):
    holder, closing, live = make_client(), make_client(), make_client()
    lock = holder.fair_lock("close-fair")
    assert lock.acquire()
    gone = spawn(lambda: closing.fair_lock("close-fair").acquire(timeout=30))
    assert wait_until(lambda: len(queue_of(r, "close-fair")) == 1)
    waiting = spawn(lambda: live.fair_lock("close-fair").acquire(timeout=30))
    assert wait_until(lambda: len(queue_of(r, "close-fair")) == 2)
    closing.close()
    assert isinstance(gone.outcome(5), ClientClosedError)
    assert len(queue_of(r, "close-fair")) == 1, "the closed client's entry is still queued"
    released = time.monotonic()
    lock.release()
    assert waiting.outcome(30) is True
    assert time.monotonic() - released < LATE


def test_a_closed_clients_candidate_leaves_the_queue(make_client, r):
    queue = election_keys("close-election")[2]
    leader = make_client(watchdog_timeout=6.0).election("close-election")
    closing, live = make_client(watchdog_timeout=6.0), make_client(watchdog_timeout=6.0)
    assert leader.campaign("leader") == 1
    gone = spawn(lambda: closing.election("close-election").campaign("gone", timeout=30))
    assert wait_until(lambda: r.llen(queue) == 1)
    rival = live.election("close-election")
    waiting = spawn(lambda: rival.campaign("live", timeout=30))
    assert wait_until(lambda: r.llen(queue) == 2)
    closing.close()
    assert isinstance(gone.outcome(5), ClientClosedError)
    assert r.llen(queue) == 1, "the closed client's candidate is still queued"
    resigned = time.monotonic()
    leader.resign()
    assert waiting.outcome(30) == 2
    assert time.monotonic() - resigned < LATE
    assert rival.term == 2


def test_a_second_close_returns_once_the_first_has_closed(make_client, r, server):
    """``close()`` called again while the first is still closing (its waiter's give-up
    waits for a stopped server) returns only when the client is closed: the waiter has
    left the queue and the connections are given back (before: the second call returned
    at once, and closed the connection pool under the first's give-up)."""
    holder, closing = make_client(), make_client()
    lock = holder.fair_lock("close-twice")
    assert lock.acquire()
    gone = spawn(lambda: closing.fair_lock("close-twice").acquire(timeout=30))
    assert wait_until(lambda: len(queue_of(r, "close-twice")) == 1)
    resume = threading.Timer(0.3, server.resume)  # the fault's length, not a sync
    server.pause()  # the give-up cannot finish: the first close() waits for it
    try:
        first = spawn(closing.close)
        assert wait_until(lambda: closing._runner.closing)
        resume.start()
        closing.close()
        assert closing._runner.closed, "the second close() returned before the first ended"
    finally:
        resume.cancel()
        server.resume()
    assert first.outcome(5) is None
    assert isinstance(gone.outcome(5), ClientClosedError)
    assert queue_of(r, "close-twice") == [], "the closed client's entry is still queued"
    lock.release()


def test_close_after_a_targeted_unlock_returns_at_once(make_client, r):
    """A client whose release woke another client alone keeps a flow of back-up looks for
    ``WAKE_CHECK_LINGER`` (1 s) after its last look. Closed meanwhile, that flow ends at
    once (before: its pauses ended at close() and it spun until the linger was over,
    holding the event loop, or a thread, for up to 1 s; close() took 0.8 s)."""
    releaser, waiter = make_client(), make_client()
    held, wanted = releaser.lock("close-look"), waiter.lock("close-look")
    assert held.acquire()

    def take_and_give_back() -> bool:
        taken = wanted.acquire(timeout=10)
        wanted.release()
        return taken

    waiting = spawn(take_and_give_back)
    assert wait_until(lambda: r.zcard("tenure_lock_wake:{close-look}") > 0)
    held.release()  # woke the waiter's client alone: a back-up look is armed
    assert waiting.outcome(10) is True
    checks = releaser._runner.ctx.wake_checks
    # The look made (none due), the flow lingering (it woke since: not -inf).
    assert wait_until(lambda: not checks._due and checks._awake > -math.inf, 1)
    started = time.monotonic()
    releaser.close()
    assert time.monotonic() - started < 0.3
    assert wait_until(lambda: checks._awake == -math.inf, 0.3, 0.005), (
        "the flow of back-up looks still runs after close()"
    )
