# PermitExpirableSemaphore (asyncio source of tests/_sync/test_permit_semaphore.py).
"""PermitExpirableSemaphore: twins of Redisson's RedissonPermitExpirableSemaphoreTest
scenarios, the wire layout read with raw redis-py, expiry, watchdog renewal and loss."""

from __future__ import annotations

import logging
import math
import time
import uuid

import pytest

import tenure
from support.twins import AsyncEvent, async_sleep, async_spawn, async_wait_until
from support.wire import max_concurrency, server_ms


async def test_wire_layout_is_redissons(async_client, r):
    sem = async_client.permit_expirable_semaphore("gpus")
    pubsub = r.pubsub()
    pubsub.subscribe("redisson_sc:{gpus}")
    assert pubsub.get_message(timeout=1)["type"] == "subscribe"
    assert await sem.try_set_permits(2)
    assert pubsub.get_message(timeout=2)["data"] == b"2"
    permit = await sem.acquire(lease_time=10)
    assert len(permit) == 32
    assert int(permit, 16) >= 0
    assert permit == permit.lower()
    assert r.get("gpus") == b"1"
    assert r.type("{gpus}:timeout") == b"zset"
    [(member, score)] = r.zrange("{gpus}:timeout", 0, -1, withscores=True)
    assert member == bytes.fromhex(permit)  # 16 raw bytes
    assert 9_000 < score - server_ms(r) <= 10_000  # expiry epoch-ms
    await sem.release(permit)
    assert pubsub.get_message(timeout=2)["data"] == b"2"
    assert r.zcard("{gpus}:timeout") == 0
    assert r.get("gpus") == b"2"
    pubsub.close()


async def test_redisson_permit_without_lease_is_honoured(async_client, r):
    r.set("shared", 0)
    raw = bytes(range(16))
    r.zadd("{shared}:timeout", {raw: 922337203685477})  # a Redisson acquire() without lease
    sem = async_client.permit_expirable_semaphore("shared")
    assert await sem.remaining_lease(raw.hex()) == math.inf
    assert not await sem.acquire(blocking=False)
    await sem.release(raw.hex())
    assert await sem.available_permits() == 1


async def test_release_of_unknown_permit_raises(async_client):
    # Redisson testNotExistent / testReleaseWithoutPermits.
    sem = async_client.permit_expirable_semaphore("none")
    await sem.try_set_permits(1)
    unknown = "0123456789abcdef0123456789abcdef"
    with pytest.raises(tenure.NotOwnedError) as raised:
        await sem.release(unknown)
    assert not isinstance(raised.value, tenure.LockLostError)
    assert not await sem.try_release(unknown)
    assert not sem.lost(unknown)
    assert await sem.available_permits() == 1


async def test_permit_is_released_once(async_client):
    sem = async_client.permit_expirable_semaphore("twice")
    await sem.try_set_permits(1)
    permit = await sem.acquire()
    assert await sem.try_release(permit)
    assert not await sem.try_release(permit)
    assert await sem.available_permits() == 1


async def test_acquire_waits_and_one_attempt(async_client):
    # Redisson testBlockingAcquire / testTryAcquire.
    sem = async_client.permit_expirable_semaphore("block")
    await sem.try_set_permits(1)
    first = await sem.acquire()
    assert await sem.acquire(blocking=False) is None
    assert await sem.acquire(timeout=0.2) is None
    job = async_spawn(sem.acquire)
    assert not await job.join(0.2)
    await sem.release(first)
    second = await job.result(5)
    assert second is not None
    assert second != first
    await sem.release(second)


async def test_leased_permit_expires_and_returns(async_client, r):
    # Redisson testExpire: the permit comes back by itself after its lease.
    sem = async_client.permit_expirable_semaphore("exp")
    await sem.try_set_permits(1)
    permit = await sem.acquire(lease_time=0.4)
    assert 0 < await sem.remaining_lease(permit) <= 0.4
    start = time.monotonic()
    other = await sem.acquire(timeout=5)  # woken at the permit's expiry, not by polling
    waited = time.monotonic() - start
    assert other is not None
    assert 0.25 < waited < 0.4 + 0.5, f"got the expired permit after {waited:.3f} s"
    assert await sem.remaining_lease(permit) is None
    with pytest.raises(tenure.LockLostError):
        await sem.release(permit)
    assert sem.lost(permit)
    await sem.release(other)
    assert await sem.available_permits() == 1


async def test_available_permits_counts_expired_back(async_client):
    sem = async_client.permit_expirable_semaphore("avail")
    await sem.try_set_permits(3)
    await sem.acquire(lease_time=0.2)
    await sem.acquire(lease_time=10)
    assert await sem.available_permits() == 1
    await async_sleep(0.4)
    assert await sem.available_permits() == 2
    assert await sem.drain_permits() == 2


async def test_update_lease_time(async_client):
    # Redisson testUpdateLeaseTime.
    sem = async_client.permit_expirable_semaphore("upd")
    await sem.try_set_permits(1)
    permit = await sem.acquire(lease_time=0.3)
    assert await sem.update_lease_time(permit, 5)
    assert 4 < await sem.remaining_lease(permit) <= 5
    await async_sleep(0.5)
    assert await sem.available_permits() == 0
    await sem.release(permit)
    assert not await sem.update_lease_time(permit, 5)


async def test_a_lease_moved_earlier_wakes_a_waiter_refused_before(async_make_client, r):
    """A waiter refused while the only permit had a 5 s lease sleeps to that end; the holder
    moving the end to 0.1 s from now must wake it to look again (before: it got the permit
    at the old end, 4.7 s after the update)."""
    holder, waiter = async_make_client(), async_make_client()
    sem = holder.permit_expirable_semaphore("moved")
    assert await sem.try_set_permits(1)
    permit = await sem.acquire(lease_time=5)
    waiting = async_spawn(lambda: waiter.permit_expirable_semaphore("moved").acquire(timeout=10))
    # Subscribed: its attempts were refused with the 5 s end (the last one just after).
    assert await async_wait_until(lambda: r.pubsub_numsub("redisson_sc:{moved}")[0][1] == 1)
    await async_sleep(0.1)  # its attempt after subscribing is refused too: else it sees 0.1 s
    updated = time.monotonic()
    assert await sem.update_lease_time(permit, 0.1)
    assert await waiting.result(10)
    assert time.monotonic() - updated < 1.5


async def test_set_permits_counts_permits_out(async_client):
    sem = async_client.permit_expirable_semaphore("total")
    await sem.try_set_permits(2)
    await sem.acquire()
    await sem.set_permits(5)
    assert await sem.available_permits() == 4


async def test_counts_published_are_positive_only(async_client, r):
    """As Redisson: a set below the permits out, and expired permits returned to a count
    still <= 0, publish nothing (its listeners and clients expect positive counts)."""
    sem = async_client.permit_expirable_semaphore("positive")
    pubsub = r.pubsub()
    pubsub.subscribe("redisson_sc:{positive}")
    assert pubsub.get_message(timeout=1)["type"] == "subscribe"
    assert await sem.try_set_permits(3)
    assert pubsub.get_message(timeout=2)["data"] == b"3"
    for _ in range(3):
        assert await sem.acquire(lease_time=0.2)
    await sem.set_permits(0)  # 0 - 3 out: -3 available, nothing to publish
    assert r.get("positive") == b"-3"
    await async_sleep(0.3)
    assert await sem.available_permits() == 0  # the 3 expired permits returned: 0, unpublished
    await sem.set_permits(2)
    messages = []
    while (message := pubsub.get_message(timeout=0.3)) is not None:
        messages.append(message["data"])
    assert messages == [b"2"]
    pubsub.close()


async def test_watchdog_keeps_a_permit_past_three_leases(async_make_client, r):
    sem = async_make_client(watchdog_timeout=0.6).permit_expirable_semaphore("kept")
    await sem.try_set_permits(1)
    permit = await sem.acquire()
    start = time.monotonic()
    while time.monotonic() - start < 2.0:
        assert r.zcard("{kept}:timeout") == 1, "the watchdog let the permit expire"
        await async_sleep(0.05)
    assert 0 < await sem.remaining_lease(permit) <= 0.6
    assert not sem.lost(permit)
    await sem.release(permit)
    assert await sem.available_permits() == 1


async def test_loss_is_reported_by_flag_callback_and_release(async_make_client, r):
    seen: list[tuple[object, str]] = []
    reported = AsyncEvent()

    def on_lost(sem: object, permit: str) -> None:
        seen.append((sem, permit))
        reported.set()

    sem = async_make_client(watchdog_timeout=0.6).permit_expirable_semaphore(
        "loss", on_lost=on_lost
    )
    await sem.try_set_permits(1)
    permit = await sem.acquire()
    r.zrem("{loss}:timeout", bytes.fromhex(permit))  # taken away behind the client's back
    assert await reported.wait(3), "the watchdog did not report the loss"
    assert seen == [(sem, permit)]
    assert sem.lost(permit)
    with pytest.raises(tenure.LockLostError):
        await sem.release(permit)


async def test_with_block_gives_the_permit_id(async_client):
    sem = async_client.permit_expirable_semaphore("with")
    await sem.try_set_permits(1)
    async with sem(timeout=1, lease_time=5) as permit:
        assert 4 < await sem.remaining_lease(permit) <= 5
        with pytest.raises(tenure.LockTimeout):
            async with sem(timeout=0.1):
                pass
    assert await sem.remaining_lease(permit) is None
    assert await sem.available_permits() == 1


async def test_bad_arguments_raise_before_io(async_client, r):
    sem = async_client.permit_expirable_semaphore("bad")
    for call, error in [
        (lambda: sem.acquire(lease_time=0), ValueError),
        (lambda: sem.acquire(lease_time=float("nan")), ValueError),
        (lambda: sem.acquire(timeout=-3), ValueError),
        (lambda: sem.release("xyz"), ValueError),
        (lambda: sem.release("0123456789ABCDEF0123456789ABCDEF"), ValueError),
        (lambda: sem.release(42), TypeError),
        (lambda: sem.try_release(""), ValueError),
        (lambda: sem.update_lease_time("0" * 32, -1), ValueError),
        (lambda: sem.update_lease_time("0" * 32, None), ValueError),
        (lambda: sem.remaining_lease("0" * 31), ValueError),
    ]:
        with pytest.raises(error):
            call()
    assert r.keys("*") == []
    with pytest.raises(TypeError):
        async_client.permit_expirable_semaphore("x", on_lost=3)


async def test_concurrency_never_exceeds_permits(async_make_client):
    clients = [async_make_client() for _ in range(3)]
    await clients[0].permit_expirable_semaphore("conc").try_set_permits(2)
    spans: list[tuple[int, int]] = []

    async def work(client: tenure.AsyncClient) -> None:
        sem = client.permit_expirable_semaphore("conc")
        for _ in range(5):
            async with sem(lease_time=10):
                enter = time.monotonic_ns()
                await async_sleep(0.005)
                spans.append((enter, time.monotonic_ns()))

    jobs = [async_spawn(work, c) for c in clients for _ in range(3)]
    for job in jobs:
        await job.result(60)
    assert len(spans) == 45
    assert max_concurrency(spans) == 2
    assert await clients[0].permit_expirable_semaphore("conc").available_permits() == 2


async def test_a_wait_on_permits_never_set_is_said_once(async_client, caplog):
    # issue 26 item 8, for expirable permits: the first wait on a count never set says so.
    caplog.set_level(logging.WARNING, logger="tenure")
    name = f"never-{uuid.uuid4().hex[:8]}"
    sem = async_client.permit_expirable_semaphore(name)
    assert await sem.acquire(blocking=False) is None  # no wait: nothing to say
    assert await sem.acquire(timeout=0.2) is None
    assert await sem.acquire(timeout=0.2) is None
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(said) == 1, said
    assert name in said[0]
    assert "PermitExpirableSemaphore" in said[0]
    caplog.clear()
    await sem.try_set_permits(1)
    permit = await sem.acquire()
    assert await sem.acquire(timeout=0.2) is None  # none left, but set: no word
    await sem.release(permit)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
