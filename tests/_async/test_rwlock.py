# ReadWriteLock (asyncio source of tests/_sync/test_rwlock.py).
"""ReadWriteLock: sharing, exclusion, per-hold expiry, downgrade, upgrade refusal, watchdog of
read holds. Several processes: tests/process."""

from __future__ import annotations

import time

import pytest
import redis

import tenure
from support.twins import (
    AsyncBarrier,
    AsyncEvent,
    async_gather,
    async_sleep,
    async_spawn,
    async_stamped,
    async_wait_until,
)
from support.wire import owner_fields, owner_of
from tenure import keys


def waiters_on(r: redis.Redis, name: str) -> int:
    """Subscribers of the read-write lock's channel (a waiting caller's client listens)."""
    return int(r.pubsub_numsub(keys.rw_channel(name))[0][1])


async def test_readers_share_with_redisson_layout(
    async_client: tenure.AsyncClient, r: redis.Redis
) -> None:
    rw = async_client.read_write_lock("catalog")
    read, write = rw.read_lock(), rw.write_lock()
    assert isinstance(rw, tenure.AsyncReadWriteLock)
    assert rw.read_lock() is read
    assert rw.name == "catalog"
    assert await read.acquire()
    assert await read.acquire(lease_time=20)
    owner = owner_of(r, "catalog", async_client.client_id)  # before another caller joins

    async def other() -> tuple[bool, int]:
        got = await read.acquire(blocking=False)
        count = await read.hold_count()
        await read.release()
        return got, count

    assert await async_spawn(other).result() == (True, 1)
    assert await read.locked()
    assert not await write.locked()
    assert await read.owned()
    assert await read.hold_count() == 2
    assert r.hget("catalog", "mode") == b"read"
    assert r.hget("catalog", owner) == b"2"
    prefix = f"{{catalog}}:{owner}:rwlock_timeout"
    assert 0 < r.pttl(f"{prefix}:1") <= async_client.watchdog_timeout * 1000
    assert 19_000 < r.pttl(f"{prefix}:2") <= 20_000
    lease = await read.remaining_lease()
    assert lease is not None
    assert 29 < lease <= 30  # the longest hold
    await read.release()
    assert r.exists(f"{prefix}:2") == 0
    assert r.exists(f"{prefix}:1") == 1
    await read.release()
    assert not await read.locked()
    assert r.keys("*") == []
    with pytest.raises(tenure.NotOwnedError):
        await read.release()
    with pytest.raises(tenure.NotOwnedError):
        await write.release()


async def test_write_excludes_and_reentry_adds_lease(
    async_client: tenure.AsyncClient, r: redis.Redis
) -> None:
    rw = async_client.read_write_lock("w")
    write = rw.write_lock()
    assert await write.acquire(lease_time=10)
    assert await write.acquire(lease_time=10)
    assert 19 < await write.remaining_lease() <= 20  # type: ignore[operator]
    assert r.hget("w", "mode") == b"write"
    assert await write.hold_count() == 2
    [field] = owner_fields(r, "w", async_client.client_id)
    assert field.endswith(":write")
    assert r.hget("w", field) == b"2"
    for side in (rw.read_lock(), write):
        assert await async_spawn(lambda s=side: s.acquire(timeout=0.2)).result() is False
    # a write release wakes every waiter: two readers of this client get in together
    readers = [
        async_spawn(lambda: rw.read_lock().acquire(timeout=10, lease_time=5)) for _ in range(2)
    ]
    await write.release()
    released = time.monotonic()
    await write.release()
    for job in readers:
        assert await job.result() is True
    assert time.monotonic() - released < 2.0
    assert r.hget("w", "mode") == b"read"


async def test_read_holder_asking_for_write_gets_upgrade_error(
    async_client: tenure.AsyncClient, r: redis.Redis
) -> None:
    rw = async_client.read_write_lock("up")
    assert await rw.read_lock().acquire()
    started = time.monotonic()
    with pytest.raises(tenure.LockUpgradeError):
        await rw.write_lock().acquire()  # blocking, no timeout: must not wait on itself
    with pytest.raises(tenure.LockUpgradeError):
        await rw.write_lock().acquire(blocking=False)
    assert time.monotonic() - started < 1.0
    owner = owner_of(r, "up", async_client.client_id)
    assert r.hgetall("up") == {b"mode": b"read", owner.encode(): b"1"}
    await rw.read_lock().release()
    assert await rw.write_lock().acquire(blocking=False)  # free again: the write lock is fine
    await rw.write_lock().release()


async def test_write_to_read_downgrade(async_client: tenure.AsyncClient, r: redis.Redis) -> None:
    rw = async_client.read_write_lock("down")
    read, write = rw.read_lock(), rw.write_lock()
    assert await write.acquire()  # watchdog lease: a waiting reader gets in only if woken
    assert await read.acquire()  # the writer may read too
    waiting = async_spawn(async_stamped, lambda: read.acquire(timeout=10))
    # the reader waits on the lock's channel (its waiting is seen there only)
    assert await async_wait_until(lambda: waiters_on(r, "down") == 1)
    assert not waiting.done()
    await write.release()
    downgraded = time.monotonic()
    acquired, at = await waiting.result()
    assert acquired
    assert at - downgraded < 1.0
    assert r.hget("down", "mode") == b"read"
    assert await read.locked()
    assert not await write.locked()
    assert await read.hold_count() == 1
    assert await write.hold_count() == 0
    assert await async_spawn(lambda: write.acquire(blocking=False)).result() is False
    await read.release()
    assert r.hget("down", "mode") == b"read"  # the other caller's read hold remains


async def test_upgrade_refused_downgrade_wakes_reader_hash_tagged(
    async_client: tenure.AsyncClient, r: redis.Redis
) -> None:
    rw = async_client.read_write_lock("{t}:adown")
    read, write = rw.read_lock(), rw.write_lock()
    assert await read.acquire()
    with pytest.raises(tenure.LockUpgradeError):
        await write.acquire()
    with pytest.raises(tenure.LockUpgradeError):
        await write.acquire(blocking=False)
    await read.release()
    assert await write.acquire()
    assert await read.acquire()
    other = async_spawn(lambda: rw.read_lock().acquire(timeout=10))
    assert await async_wait_until(lambda: waiters_on(r, "{t}:adown") == 1)
    assert not other.done()  # waits while the write lock is held
    owner = owner_of(r, "{t}:adown", async_client.client_id)
    await write.release()  # downgrade: wakes the waiting reader
    started = time.monotonic()
    assert await other.result()
    assert time.monotonic() - started < 1.0
    assert await read.locked()
    assert not await write.locked()
    assert r.hget("{t}:adown", "mode") == b"read"
    assert r.exists(f"{{t}}:adown:{owner}:rwlock_timeout:1") == 1
    await read.release()


async def test_writer_waits_for_longest_reader(async_client: tenure.AsyncClient) -> None:
    rw = async_client.read_write_lock("leases")
    for lease in (0.5, 1.0, 2.0):  # three readers that never release
        assert await async_spawn(lambda le=lease: rw.read_lock().acquire(lease_time=le)).result()
    start = time.monotonic()
    assert await rw.write_lock().acquire(timeout=10)
    waited = time.monotonic() - start
    assert 1.7 < waited < 2.0 + 1.5
    await rw.write_lock().release()


async def test_force_release_acts_per_side(
    async_client: tenure.AsyncClient, r: redis.Redis
) -> None:
    rw = async_client.read_write_lock("force")
    read, write = rw.read_lock(), rw.write_lock()
    assert await read.acquire()
    assert await read.acquire()
    assert await write.force_release() is False
    assert r.exists("force")
    assert await read.force_release() is True
    assert r.keys("*") == []  # the hash and every read hold's timeout key
    with pytest.raises(tenure.LockLostError):
        await read.release()
    assert await write.acquire()
    assert await read.force_release() is False
    assert not await read.locked()
    assert await write.locked()
    assert await write.force_release() is True
    assert not await write.locked()


async def test_hash_tagged_names(async_client: tenure.AsyncClient, r: redis.Redis) -> None:
    rw = async_client.read_write_lock("{t}:abc")
    read = rw.read_lock()
    assert await read.acquire(lease_time=10)
    owner = owner_of(r, "{t}:abc", async_client.client_id)
    assert r.hget("{t}:abc", owner) == b"1"
    assert 0 < r.pttl(f"{{t}}:abc:{owner}:rwlock_timeout:1") <= 10_000
    assert keys.rw_channel("{t}:abc") == "redisson_rwlock:{t}:abc"
    waiting = async_spawn(lambda: rw.write_lock().acquire(timeout=10))
    assert await async_wait_until(lambda: waiters_on(r, "{t}:abc") == 1)
    await read.release()  # publishes on redisson_rwlock:{t}:abc and wakes the writer
    assert await waiting.result() is True
    assert r.hget("{t}:abc", "mode") == b"write"
    fair = async_client.fair_lock("{t}:abc:fair")
    assert await fair.acquire(lease_time=5)
    job = async_spawn(lambda: fair.acquire(timeout=5))
    assert await async_wait_until(lambda: r.llen("redisson_lock_queue:{t}:abc:fair") == 1)
    await fair.release()
    assert await job.result() is True


async def test_readers_overlap_writer_excludes(async_client: tenure.AsyncClient, r) -> None:
    rw = async_client.read_write_lock("arw")
    assert isinstance(rw, tenure.AsyncReadWriteLock)
    readers = writers = peak = violations = 0

    async def read() -> None:
        nonlocal readers, peak, violations
        for _ in range(3):
            async with rw.read_lock():
                readers += 1
                peak = max(peak, readers)
                violations += writers != 0
                await async_sleep(0.02)
                readers -= 1

    async def write() -> None:
        nonlocal writers, violations
        for _ in range(5):
            async with rw.write_lock()(timeout=30):
                writers += 1
                violations += writers != 1 or readers != 0
                await async_sleep(0.005)
                writers -= 1

    await async_gather(*[read] * 8, write, write)
    assert peak > 1
    assert violations == 0
    assert r.exists("arw") == 0


async def test_watchdog_keeps_50_readers_and_renews_only_own(
    async_make_client, r: redis.Redis
) -> None:
    client = async_make_client(watchdog_timeout=1.0)
    other = async_make_client(watchdog_timeout=1.0)
    rw = client.read_write_lock("wd")
    assert await other.read_write_lock("wd").read_lock().acquire(lease_time=1.5)  # not renewed
    other_key = f"{{wd}}:{owner_of(r, 'wd', other.client_id)}:rwlock_timeout:1"
    lost: list[object] = []
    rw_lost = client.read_write_lock("wd", on_lost=lost.append)
    held = AsyncBarrier(51)
    done = AsyncEvent()
    results: list[object] = []

    async def reader() -> None:
        side = rw_lost.read_lock()
        try:
            assert await side.acquire()
            await held.wait()
            await done.wait()
            results.append((await side.owned(), side.lost))
            await side.release()
        except BaseException as error:
            results.append(error)

    jobs = [async_spawn(reader) for _ in range(50)]
    try:
        await held.wait(timeout=30)
        start = time.monotonic()
        assert await async_wait_until(lambda: r.exists(other_key) == 0, 3)  # the other expired
        await async_sleep(max(0.0, 3.5 - (time.monotonic() - start)))  # 3.5 x watchdog_timeout
        assert await rw.read_lock().locked()
        assert r.hlen("wd") == 52  # mode, 50 readers and the other's stale field
    finally:
        done.set()
        for job in jobs:
            await job.join()
    assert results == [(True, False)] * 50
    assert lost == []
    assert not await rw.read_lock().locked()


async def test_watchdog_keeps_readers_past_three_leases(async_make_client) -> None:
    rw = async_make_client(watchdog_timeout=1.0).read_write_lock("awd")
    held = AsyncBarrier(20)

    async def reader() -> tuple[bool, bool]:
        side = rw.read_lock()
        assert await side.acquire()
        await held.wait()
        await async_sleep(3.2)  # > 3 x watchdog_timeout
        result = (await side.owned(), side.lost)
        await side.release()
        return result

    assert await async_gather(*[reader] * 20) == [(True, False)] * 20
