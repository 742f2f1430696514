"""The watchdog: renewal while held, expiry after a crash, loss reporting."""

from __future__ import annotations

import multiprocessing
import threading
import time

import pytest

import tenure
from workers import hold_forever

SPAWN = multiprocessing.get_context("spawn")


def test_watchdog_keeps_lock_past_three_leases(make_client, r):
    lock = make_client(watchdog_timeout=1.0).lock("kept")
    lock.acquire()
    start = time.monotonic()
    while time.monotonic() - start < 3.5:
        assert r.exists("kept"), "the watchdog let the lock expire"
        time.sleep(0.1)
    assert lock.owned() and not lock.lost
    lock.release()
    assert not r.exists("kept")


def test_explicit_lease_is_never_renewed(make_client, r):
    lock = make_client(watchdog_timeout=1.0).lock("fixed")
    lock.acquire(lease_time=1.5)
    time.sleep(1.8)  # past the fixed lease, and past one watchdog tick
    assert not r.exists("fixed")
    with pytest.raises(tenure.LockLostError):
        lock.release()


def test_killed_holder_expires_within_one_lease(server, make_client):
    ready = SPAWN.Event()
    proc = SPAWN.Process(target=hold_forever, args=(server.url, "crash", 1.0, ready))
    proc.start()
    try:
        assert ready.wait(20)
        lock = make_client().lock("crash")
        time.sleep(2.5)  # more than two leases: the holder's watchdog keeps it
        assert not lock.acquire(blocking=False)
        proc.kill()
        killed = time.monotonic()
        assert lock.acquire(timeout=5)
        waited = time.monotonic() - killed
        assert waited <= 1.0 + 0.3, f"took {waited:.3f} s after the kill"
        lock.release()
    finally:
        proc.kill()
        proc.join()


def test_loss_is_reported_by_watchdog_flag_callback_and_release(make_client):
    seen: list[object] = []
    reported = threading.Event()

    def on_lost(lock: object) -> None:
        seen.append(lock)
        reported.set()

    lock = make_client(watchdog_timeout=0.6).lock("taken", on_lost=on_lost)
    lock.acquire()
    assert make_client().lock("taken").force_release()
    assert reported.wait(3), "the watchdog did not report the loss"
    assert seen == [lock]
    assert lock.lost
    with pytest.raises(tenure.LockLostError):
        lock.release()


def test_release_cancels_renewal(make_client, r):
    lost = threading.Event()
    client = make_client(watchdog_timeout=0.3)
    for _ in range(20):
        lock = client.lock("quick", on_lost=lambda _lock: lost.set())
        lock.acquire()
        lock.release()
    time.sleep(0.4)  # more than one renewal tick
    assert not lost.is_set()
    assert not r.exists("quick")
