# The watchdog (asyncio source of tests/_sync/test_watchdog.py).
"""The watchdog: renewal while held, loss reporting. A killed holder: tests/process."""

from __future__ import annotations

import time

import pytest

import tenure
from support.twins import AsyncEvent, async_sleep, async_wait_until
from tenure import keys


async def test_watchdog_keeps_lock_past_three_leases(async_make_client, r):
    lock = async_make_client(watchdog_timeout=1.0).lock("kept")
    await lock.acquire()
    start = time.monotonic()
    while time.monotonic() - start < 3.5:
        assert r.exists("kept"), "the watchdog let the lock expire"
        await async_sleep(0.1)
    assert await lock.owned()
    assert not lock.lost
    await lock.release()
    assert not r.exists("kept")


async def test_a_renewal_tells_the_waiters_channel_the_new_lease(async_make_client, r):
    """The renewal publishes ``-<lease ms>`` on the channel waiters listen on (a Lock's, a
    read-write lock's); a number neither 0 nor 1, which Redisson's listeners ignore."""
    client = async_make_client(watchdog_timeout=0.9)
    sub = r.pubsub(ignore_subscribe_messages=True)
    sub.subscribe(keys.lock_channel("told"), keys.rw_channel("told-rw"))
    try:
        await client.lock("told").acquire()
        await client.read_write_lock("told-rw").read_lock().acquire()
        heard: dict[str, str] = {}

        def both() -> bool:
            message = sub.get_message(timeout=0)
            if message is not None:
                heard[message["channel"].decode()] = message["data"].decode()
            return len(heard) == 2

        assert await async_wait_until(both, timeout=5)
        assert heard == {keys.lock_channel("told"): "-900", keys.rw_channel("told-rw"): "-900"}
        assert keys.renewed_lease("-900") == 0.9
        assert keys.renewed_lease("0") is None
    finally:
        sub.close()


async def test_explicit_lease_is_never_renewed(async_make_client, r):
    lock = async_make_client(watchdog_timeout=1.0).lock("fixed")
    await lock.acquire(lease_time=1.5)
    await async_sleep(1.8)  # past the fixed lease, and past one watchdog tick
    assert not r.exists("fixed")
    with pytest.raises(tenure.LockLostError):
        await lock.release()


async def test_loss_is_reported_by_watchdog_flag_callback_and_release(async_make_client):
    seen: list[object] = []
    reported = AsyncEvent()

    def on_lost(lock: object) -> None:
        seen.append(lock)
        reported.set()

    lock = async_make_client(watchdog_timeout=0.6).lock("taken", on_lost=on_lost)
    await lock.acquire()
    assert await async_make_client().lock("taken").force_release()
    assert await reported.wait(3), "the watchdog did not report the loss"
    assert seen == [lock]
    assert lock.lost
    with pytest.raises(tenure.LockLostError):
        await lock.release()


async def test_watchdog_renews_then_reports_loss_within_a_lease(async_make_client, r):
    lost: list[object] = []
    lock = async_make_client(watchdog_timeout=0.6).lock("awd", on_lost=lost.append)
    await lock.acquire()
    await async_sleep(2.0)
    assert r.exists("awd")
    assert not lock.lost
    assert await lock.force_release()
    await async_sleep(0.6)
    assert lost == [lock]
    assert lock.lost
    with pytest.raises(tenure.LockLostError):
        await lock.release()


async def test_release_cancels_renewal(async_make_client, r):
    lost = AsyncEvent()
    client = async_make_client(watchdog_timeout=0.3)
    for _ in range(20):
        lock = client.lock("quick", on_lost=lambda _lock: lost.set())
        await lock.acquire()
        await lock.release()
    await async_sleep(0.4)  # more than one renewal tick
    assert not lost.is_set()
    assert not r.exists("quick")


async def test_watchdog_keeps_a_write_hold_past_three_leases(async_make_client, r):
    """The write side renews through the plain lock's renewal script, on a read-write hash
    (which the kind checks must not take for another kind's key)."""
    rw = async_make_client(watchdog_timeout=0.6).read_write_lock("kept-rw")
    write, read = rw.write_lock(), rw.read_lock()
    assert await write.acquire()
    assert await read.acquire()
    start = time.monotonic()
    while time.monotonic() - start < 2.0:
        assert r.exists("kept-rw"), "the watchdog let the write hold expire"
        await async_sleep(0.1)
    assert not write.lost
    assert not read.lost
    await write.release()  # downgrade: the read hold remains
    await read.release()
    assert not r.exists("kept-rw")
