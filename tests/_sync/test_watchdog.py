# GENERATED from tests/_async/test_watchdog.py by tools/unasync.py: edit that file, not this one.
"""The watchdog: renewal while held, loss reporting. A killed holder: tests/process."""

from __future__ import annotations

import time

import pytest

import tenure
from support.twins import Event, sleep, wait_until
from tenure import keys


def test_watchdog_keeps_lock_past_three_leases(make_client, r):
    lock = make_client(watchdog_timeout=1.0).lock("kept")
    lock.acquire()
    start = time.monotonic()
    while time.monotonic() - start < 3.5:
        assert r.exists("kept"), "the watchdog let the lock expire"
        sleep(0.1)
    assert lock.owned()
    assert not lock.lost
    lock.release()
    assert not r.exists("kept")


def test_a_renewal_tells_the_waiters_channel_the_new_lease(make_client, r):
    """The renewal publishes ``-<lease ms>`` on the channel waiters listen on (a Lock's, a
    read-write lock's); a number neither 0 nor 1, which Redisson's listeners ignore."""
    client = make_client(watchdog_timeout=0.9)
    sub = r.pubsub(ignore_subscribe_messages=True)
    sub.subscribe(keys.lock_channel("told"), keys.rw_channel("told-rw"))
    try:
        client.lock("told").acquire()
        client.read_write_lock("told-rw").read_lock().acquire()
        heard: dict[str, str] = {}

        def both() -> bool:
            message = sub.get_message(timeout=0)
            if message is not None:
                heard[message["channel"].decode()] = message["data"].decode()
            return len(heard) == 2

        assert wait_until(both, timeout=5)
        assert heard == {keys.lock_channel("told"): "-900", keys.rw_channel("told-rw"): "-900"}
        assert keys.renewed_lease("-900") == 0.9
        assert keys.renewed_lease("0") is None
    finally:
        sub.close()


def test_explicit_lease_is_never_renewed(make_client, r):
    lock = make_client(watchdog_timeout=1.0).lock("fixed")
    lock.acquire(lease_time=1.5)
    sleep(1.8)  # past the fixed lease, and past one watchdog tick
    assert not r.exists("fixed")
    with pytest.raises(tenure.LockLostError):
        lock.release()


def test_loss_is_reported_by_watchdog_flag_callback_and_release(make_client):
    seen: list[object] = []
    reported = Event()

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


def test_watchdog_renews_then_reports_loss_within_a_lease(make_client, r):
    lost: list[object] = []
    lock = make_client(watchdog_timeout=0.6).lock("awd", on_lost=lost.append)
    lock.acquire()
    sleep(2.0)
    assert r.exists("awd")
    assert not lock.lost
    assert lock.force_release()
    sleep(0.6)
    assert lost == [lock]
    assert lock.lost
    with pytest.raises(tenure.LockLostError):
        lock.release()


def test_release_cancels_renewal(make_client, r):
    lost = Event()
    client = make_client(watchdog_timeout=0.3)
    for _ in range(20):
        lock = client.lock("quick", on_lost=lambda _lock: lost.set())
        lock.acquire()
        lock.release()
    sleep(0.4)  # more than one renewal tick
    assert not lost.is_set()
    assert not r.exists("quick")


def test_watchdog_keeps_a_write_hold_past_three_leases(make_client, r):
    """The write side renews through the plain lock's renewal script, on a read-write hash
    (which the kind checks must not take for another kind's key)."""
    rw = make_client(watchdog_timeout=0.6).read_write_lock("kept-rw")
    write, read = rw.write_lock(), rw.read_lock()
    assert write.acquire()
    assert read.acquire()
    start = time.monotonic()
    while time.monotonic() - start < 2.0:
        assert r.exists("kept-rw"), "the watchdog let the write hold expire"
        sleep(0.1)
    assert not write.lost
    assert not read.lost
    write.release()  # downgrade: the read hold remains
    read.release()
    assert not r.exists("kept-rw")
