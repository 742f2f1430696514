# GENERATED from tests/_async/test_rwlock.py by tools/unasync.py: edit that file, not this one.
"""ReadWriteLock: sharing, exclusion, per-hold expiry, downgrade, upgrade refusal, watchdog of
read holds. Several processes: tests/process."""

from __future__ import annotations

import time

import pytest
import redis

import tenure
from support.twins import (
    Barrier,
    Event,
    gather,
    sleep,
    spawn,
    stamped,
    wait_until,
)
from support.wire import owner_fields, owner_of
from tenure import keys


def waiters_on(r: redis.Redis, name: str) -> int:
    """Subscribers of the read-write lock's channel (a waiting caller's client listens)."""
    return int(r.pubsub_numsub(keys.rw_channel(name))[0][1])


def test_readers_share_with_redisson_layout(
    client: tenure.Client, r: redis.Redis
) -> None:
    rw = client.read_write_lock("catalog")
    read, write = rw.read_lock(), rw.write_lock()
    assert isinstance(rw, tenure.ReadWriteLock)
    assert rw.read_lock() is read
    assert rw.name == "catalog"
    assert read.acquire()
    assert read.acquire(lease_time=20)
    owner = owner_of(r, "catalog", client.client_id)  # before another caller joins

    def other() -> tuple[bool, int]:
        got = read.acquire(blocking=False)
        count = read.hold_count()
        read.release()
        return got, count

    assert spawn(other).result() == (True, 1)
    assert read.locked()
    assert not write.locked()
    assert read.owned()
    assert read.hold_count() == 2
    assert r.hget("catalog", "mode") == b"read"
    assert r.hget("catalog", owner) == b"2"
    prefix = f"{{catalog}}:{owner}:rwlock_timeout"
    assert 0 < r.pttl(f"{prefix}:1") <= client.watchdog_timeout * 1000
    assert 19_000 < r.pttl(f"{prefix}:2") <= 20_000
    lease = read.remaining_lease()
    assert lease is not None
    assert 29 < lease <= 30  # the longest hold
    read.release()
    assert r.exists(f"{prefix}:2") == 0
    assert r.exists(f"{prefix}:1") == 1
    read.release()
    assert not read.locked()
    assert r.keys("*") == []
    with pytest.raises(tenure.NotOwnedError):
        read.release()
    with pytest.raises(tenure.NotOwnedError):
        write.release()


def test_write_excludes_and_reentry_adds_lease(
    client: tenure.Client, r: redis.Redis
) -> None:
    rw = client.read_write_lock("w")
    write = rw.write_lock()
    assert write.acquire(lease_time=10)
    assert write.acquire(lease_time=10)
    assert 19 < write.remaining_lease() <= 20  # type: ignore[operator]
    assert r.hget("w", "mode") == b"write"
    assert write.hold_count() == 2
    [field] = owner_fields(r, "w", client.client_id)
    assert field.endswith(":write")
    assert r.hget("w", field) == b"2"
    for side in (rw.read_lock(), write):
        assert spawn(lambda s=side: s.acquire(timeout=0.2)).result() is False
    # a write release wakes every waiter: two readers of this client get in together
    readers = [
        spawn(lambda: rw.read_lock().acquire(timeout=10, lease_time=5)) for _ in range(2)
    ]
    write.release()
    released = time.monotonic()
    write.release()
    for job in readers:
        assert job.result() is True
    assert time.monotonic() - released < 2.0
    assert r.hget("w", "mode") == b"read"


def test_read_holder_asking_for_write_gets_upgrade_error(
    client: tenure.Client, r: redis.Redis
) -> None:
    rw = client.read_write_lock("up")
    assert rw.read_lock().acquire()
    started = time.monotonic()
    with pytest.raises(tenure.LockUpgradeError):
        rw.write_lock().acquire()  # blocking, no timeout: must not wait on itself
    with pytest.raises(tenure.LockUpgradeError):
        rw.write_lock().acquire(blocking=False)
    assert time.monotonic() - started < 1.0
    owner = owner_of(r, "up", client.client_id)
    assert r.hgetall("up") == {b"mode": b"read", owner.encode(): b"1"}
    rw.read_lock().release()
    assert rw.write_lock().acquire(blocking=False)  # free again: the write lock is fine
    rw.write_lock().release()


def test_write_to_read_downgrade(client: tenure.Client, r: redis.Redis) -> None:
    rw = client.read_write_lock("down")
    read, write = rw.read_lock(), rw.write_lock()
    assert write.acquire()  # watchdog lease: a waiting reader gets in only if woken
    assert read.acquire()  # the writer may read too
    waiting = spawn(stamped, lambda: read.acquire(timeout=10))
    # the reader waits on the lock's channel (its waiting is seen there only)
    assert wait_until(lambda: waiters_on(r, "down") == 1)
    assert not waiting.done()
    write.release()
    downgraded = time.monotonic()
    acquired, at = waiting.result()
    assert acquired
    assert at - downgraded < 1.0
    assert r.hget("down", "mode") == b"read"
    assert read.locked()
    assert not write.locked()
    assert read.hold_count() == 1
    assert write.hold_count() == 0
    assert spawn(lambda: write.acquire(blocking=False)).result() is False
    read.release()
    assert r.hget("down", "mode") == b"read"  # the other caller's read hold remains


def test_upgrade_refused_downgrade_wakes_reader_hash_tagged(
    client: tenure.Client, r: redis.Redis
) -> None:
    rw = client.read_write_lock("{t}:adown")
    read, write = rw.read_lock(), rw.write_lock()
    assert read.acquire()
    with pytest.raises(tenure.LockUpgradeError):
        write.acquire()
    with pytest.raises(tenure.LockUpgradeError):
        write.acquire(blocking=False)
    read.release()
    assert write.acquire()
    assert read.acquire()
    other = spawn(lambda: rw.read_lock().acquire(timeout=10))
    assert wait_until(lambda: waiters_on(r, "{t}:adown") == 1)
    assert not other.done()  # waits while the write lock is held
    owner = owner_of(r, "{t}:adown", client.client_id)
    write.release()  # downgrade: wakes the waiting reader
    started = time.monotonic()
    assert other.result()
    assert time.monotonic() - started < 1.0
    assert read.locked()
    assert not write.locked()
    assert r.hget("{t}:adown", "mode") == b"read"
    assert r.exists(f"{{t}}:adown:{owner}:rwlock_timeout:1") == 1
    read.release()


def test_writer_waits_for_longest_reader(client: tenure.Client) -> None:
    rw = client.read_write_lock("leases")
    for lease in (0.5, 1.0, 2.0):  # three readers that never release
        assert spawn(lambda le=lease: rw.read_lock().acquire(lease_time=le)).result()
    start = time.monotonic()
    assert rw.write_lock().acquire(timeout=10)
    waited = time.monotonic() - start
    assert 1.7 < waited < 2.0 + 1.5
    rw.write_lock().release()


def test_force_release_acts_per_side(
    client: tenure.Client, r: redis.Redis
) -> None:
    rw = client.read_write_lock("force")
    read, write = rw.read_lock(), rw.write_lock()
    assert read.acquire()
    assert read.acquire()
    assert write.force_release() is False
    assert r.exists("force")
    assert read.force_release() is True
    assert r.keys("*") == []  # the hash and every read hold's timeout key
    with pytest.raises(tenure.LockLostError):
        read.release()
    assert write.acquire()
    assert read.force_release() is False
    assert not read.locked()
    assert write.locked()
    assert write.force_release() is True
    assert not write.locked()


def test_hash_tagged_names(client: tenure.Client, r: redis.Redis) -> None:
    rw = client.read_write_lock("{t}:abc")
    read = rw.read_lock()
    assert read.acquire(lease_time=10)
    owner = owner_of(r, "{t}:abc", client.client_id)
    assert r.hget("{t}:abc", owner) == b"1"
    assert 0 < r.pttl(f"{{t}}:abc:{owner}:rwlock_timeout:1") <= 10_000
    assert keys.rw_channel("{t}:abc") == "redisson_rwlock:{t}:abc"
    waiting = spawn(lambda: rw.write_lock().acquire(timeout=10))
    assert wait_until(lambda: waiters_on(r, "{t}:abc") == 1)
    read.release()  # publishes on redisson_rwlock:{t}:abc and wakes the writer
    assert waiting.result() is True
    assert r.hget("{t}:abc", "mode") == b"write"
    fair = client.fair_lock("{t}:abc:fair")
    assert fair.acquire(lease_time=5)
    job = spawn(lambda: fair.acquire(timeout=5))
    assert wait_until(lambda: r.llen("redisson_lock_queue:{t}:abc:fair") == 1)
    fair.release()
    assert job.result() is True


def test_readers_overlap_writer_excludes(client: tenure.Client, r) -> None:
    rw = client.read_write_lock("arw")
    assert isinstance(rw, tenure.ReadWriteLock)
    readers = writers = peak = violations = 0

    def read() -> None:
        nonlocal readers, peak, violations
        for _ in range(3):
            with rw.read_lock():
                readers += 1
                peak = max(peak, readers)
                violations += writers != 0
                sleep(0.02)
                readers -= 1

    def write() -> None:
        nonlocal writers, violations
        for _ in range(5):
            with rw.write_lock()(timeout=30):
                writers += 1
                violations += writers != 1 or readers != 0
                sleep(0.005)
                writers -= 1

    gather(*[read] * 8, write, write)
    assert peak > 1
    assert violations == 0
    assert r.exists("arw") == 0


def test_watchdog_keeps_50_readers_and_renews_only_own(
    make_client, r: redis.Redis
) -> None:
    client = make_client(watchdog_timeout=1.0)
    other = make_client(watchdog_timeout=1.0)
    rw = client.read_write_lock("wd")
    assert other.read_write_lock("wd").read_lock().acquire(lease_time=1.5)  # not renewed
    other_key = f"{{wd}}:{owner_of(r, 'wd', other.client_id)}:rwlock_timeout:1"
    lost: list[object] = []
    rw_lost = client.read_write_lock("wd", on_lost=lost.append)
    held = Barrier(51)
    done = Event()
    results: list[object] = []

    def reader() -> None:
        side = rw_lost.read_lock()
        try:
            assert side.acquire()
            held.wait()
            done.wait()
            results.append((side.owned(), side.lost))
            side.release()
        except BaseException as error:
            results.append(error)

    jobs = [spawn(reader) for _ in range(50)]
    try:
        held.wait(timeout=30)
        start = time.monotonic()
        assert wait_until(lambda: r.exists(other_key) == 0, 3)  # the other expired
        sleep(max(0.0, 3.5 - (time.monotonic() - start)))  # 3.5 x watchdog_timeout
        assert rw.read_lock().locked()
        assert r.hlen("wd") == 52  # mode, 50 readers and the other's stale field
    finally:
        done.set()
        for job in jobs:
            job.join()
    assert results == [(True, False)] * 50
    assert lost == []
    assert not rw.read_lock().locked()


def test_watchdog_keeps_readers_past_three_leases(make_client) -> None:
    rw = make_client(watchdog_timeout=1.0).read_write_lock("awd")
    held = Barrier(20)

    def reader() -> tuple[bool, bool]:
        side = rw.read_lock()
        assert side.acquire()
        held.wait()
        sleep(3.2)  # > 3 x watchdog_timeout
        result = (side.owned(), side.lost)
        side.release()
        return result

    assert gather(*[reader] * 20) == [(True, False)] * 20
