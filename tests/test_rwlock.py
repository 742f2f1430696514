"""ReadWriteLock (sync): sharing, exclusion across processes, per-hold expiry, downgrade,
upgrade refusal, watchdog of read holds."""

from __future__ import annotations

import multiprocessing
import threading
import time
from concurrent.futures import ProcessPoolExecutor

import pytest
import redis
from fair_rw_workers import rw_read_and_die, rw_work, wait_until

import tenure
from servers import Server
from tenure import keys

SPAWN = multiprocessing.get_context("spawn")


def in_thread(fn, *args):  # type: ignore[no-untyped-def]
    out: list[object] = []

    def run() -> None:
        try:
            out.append(fn(*args))
        except BaseException as error:
            out.append(error)

    t = threading.Thread(target=run)
    t.start()
    return t, out


def max_concurrency(spans: list[tuple[int, int]]) -> int:
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    level = best = 0
    for _, step in events:
        level += step
        best = max(best, level)
    return best


def test_readers_share_with_redisson_layout(client: tenure.Client, r: redis.Redis) -> None:
    rw = client.read_write_lock("catalog")
    read, write = rw.read_lock(), rw.write_lock()
    assert isinstance(rw, tenure.ReadWriteLock) and rw.read_lock() is read and rw.name == "catalog"
    assert read.acquire() and read.acquire(lease_time=20)
    t, out = in_thread(lambda: (read.acquire(blocking=False), read.hold_count(), read.release()))
    t.join()
    assert out[0][:2] == (True, 1)  # type: ignore[index]
    assert read.locked() and not write.locked() and read.owned() and read.hold_count() == 2
    owner = next(f.decode() for f in r.hkeys("catalog") if f != b"mode")
    assert owner.startswith(client.client_id + ":")
    assert r.hget("catalog", "mode") == b"read" and r.hget("catalog", owner) == b"2"
    prefix = f"{{catalog}}:{owner}:rwlock_timeout"
    assert 0 < r.pttl(f"{prefix}:1") <= client.watchdog_timeout * 1000
    assert 19_000 < r.pttl(f"{prefix}:2") <= 20_000
    assert 29 < read.remaining_lease() <= 30  # the longest hold  # type: ignore[operator]
    read.release()
    assert r.exists(f"{prefix}:2") == 0 and r.exists(f"{prefix}:1") == 1
    read.release()
    assert not read.locked() and r.keys("*") == []
    with pytest.raises(tenure.NotOwnedError):
        read.release()
    with pytest.raises(tenure.NotOwnedError):
        write.release()


def test_write_excludes_and_reentry_adds_lease(client: tenure.Client, r: redis.Redis) -> None:
    rw = client.read_write_lock("w")
    write = rw.write_lock()
    assert write.acquire(lease_time=10) and write.acquire(lease_time=10)
    assert 19 < write.remaining_lease() <= 20  # type: ignore[operator]
    assert r.hget("w", "mode") == b"write" and write.hold_count() == 2
    assert r.hget("w", f"{client._runner.owner()}:write") == b"2"
    for side in (rw.read_lock(), write):
        t, out = in_thread(lambda s=side: s.acquire(timeout=0.2))
        t.join()
        assert out == [False]
    # a write release wakes every waiter: two readers of this client get in together
    readers = [
        in_thread(lambda: rw.read_lock().acquire(timeout=10, lease_time=5)) for _ in range(2)
    ]
    write.release()
    released = time.monotonic()
    write.release()
    for t, out in readers:
        t.join()
        assert out == [True]
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
    assert r.hgetall("up") == {b"mode": b"read", client._runner.owner().encode(): b"1"}
    rw.read_lock().release()
    assert rw.write_lock().acquire(blocking=False)  # free again: the write lock is fine
    rw.write_lock().release()


def test_write_to_read_downgrade(client: tenure.Client, r: redis.Redis) -> None:
    rw = client.read_write_lock("down")
    read, write = rw.read_lock(), rw.write_lock()
    assert write.acquire()  # watchdog lease: a waiting reader gets in only if woken
    assert read.acquire()  # the writer may read too
    waiting, got = in_thread(lambda: (read.acquire(timeout=10), time.monotonic()))
    time.sleep(0.2)  # the reader is waiting (it cannot be observed on the server)
    assert not got
    write.release()
    downgraded = time.monotonic()
    waiting.join()
    acquired, at = got[0]  # type: ignore[misc]
    assert acquired and at - downgraded < 1.0
    assert r.hget("down", "mode") == b"read" and read.locked() and not write.locked()
    assert read.hold_count() == 1 and write.hold_count() == 0
    t, out = in_thread(lambda: write.acquire(blocking=False))
    t.join()
    assert out == [False]
    read.release()
    assert r.hget("down", "mode") == b"read"  # the other thread's read hold remains


def test_writer_waits_for_longest_reader(client: tenure.Client) -> None:
    rw = client.read_write_lock("leases")
    for lease in (0.5, 1.0, 2.0):  # three readers that never release
        t, out = in_thread(lambda le=lease: rw.read_lock().acquire(lease_time=le))
        t.join()
        assert out == [True]
    start = time.monotonic()
    assert rw.write_lock().acquire(timeout=10)
    waited = time.monotonic() - start
    assert 1.7 < waited < 2.0 + 1.5
    rw.write_lock().release()


def test_force_release_acts_per_side(client: tenure.Client, r: redis.Redis) -> None:
    rw = client.read_write_lock("force")
    read, write = rw.read_lock(), rw.write_lock()
    assert read.acquire() and read.acquire()
    assert write.force_release() is False and r.exists("force")
    assert read.force_release() is True
    assert r.keys("*") == []  # the hash and every read hold's timeout key
    with pytest.raises(tenure.LockLostError):
        read.release()
    assert write.acquire()
    assert read.force_release() is False and not read.locked() and write.locked()
    assert write.force_release() is True and not write.locked()


def test_hash_tagged_names(client: tenure.Client, r: redis.Redis) -> None:
    rw = client.read_write_lock("{t}:abc")
    read = rw.read_lock()
    assert read.acquire(lease_time=10)
    owner = client._runner.owner()
    assert r.hget("{t}:abc", owner) == b"1"
    assert 0 < r.pttl(f"{{t}}:abc:{owner}:rwlock_timeout:1") <= 10_000
    assert keys.rw_channel("{t}:abc") == "redisson_rwlock:{t}:abc"
    waiting, got = in_thread(lambda: rw.write_lock().acquire(timeout=10))
    time.sleep(0.2)
    read.release()  # publishes on redisson_rwlock:{t}:abc and wakes the writer
    waiting.join()
    assert got == [True] and r.hget("{t}:abc", "mode") == b"write"
    fair = client.fair_lock("{t}:abc:fair")
    assert fair.acquire(lease_time=5)
    t, out = in_thread(lambda: fair.acquire(timeout=5))
    assert wait_until(lambda: r.llen("redisson_lock_queue:{t}:abc:fair") == 1)
    fair.release()
    t.join()
    assert out == [True]


def test_readers_overlap_writers_exclusive_across_processes(server: Server, r: redis.Redis) -> None:
    start = SPAWN.Manager().Event()
    jobs = [(False, 4, 4), (False, 4, 4), (True, 10, 1), (True, 10, 1)]  # writer, rounds, threads
    with ProcessPoolExecutor(len(jobs), mp_context=SPAWN) as pool:
        futures = [
            pool.submit(rw_work, server.url, "shared", writer, rounds, threads, start)
            for writer, rounds, threads in jobs
        ]
        start.set()
        results = [f.result(timeout=90) for f in futures]
    reads = results[0] + results[1]
    writes = results[2] + results[3]
    assert len(reads) == 32 and len(writes) == 20
    assert int(r.get("violations") or 0) == 0
    assert max_concurrency(reads) > 1  # 8 readers overlap
    for a, b in writes:  # no span of anyone intersects a write span
        assert all(not (c < b and a < d) for c, d in reads)
        assert sum(1 for c, d in writes if c < b and a < d) == 1


def test_dead_reader_expires_on_its_own_lease(
    server: Server, client: tenure.Client, r: redis.Redis
) -> None:
    ready = SPAWN.Event()
    proc = SPAWN.Process(target=rw_read_and_die, args=(server.url, "dead", 1.0, ready))
    proc.start()
    try:
        rw = client.read_write_lock("dead")
        assert ready.wait(30)
        proc.kill()
        assert rw.read_lock().acquire(lease_time=30)
        writer, got = in_thread(lambda: (rw.write_lock().acquire(timeout=20), time.monotonic()))
        ours = f"{{dead}}:{client._runner.owner()}:"
        dead_keys = [k for k in r.keys("{dead}:*") if not k.decode().startswith(ours)]
        assert len(dead_keys) == 1
        assert wait_until(lambda: r.exists(*dead_keys) == 0, 5)  # gone after its 1 s lease
        assert r.pttl("dead") > 20_000  # while our 30 s hold keeps the lock
        released = time.monotonic()
        rw.read_lock().release()  # the dead reader's field no longer counts
        writer.join()
        acquired, at = got[0]  # type: ignore[misc]
        assert acquired and at - released < 1.0
    finally:
        proc.kill()
        proc.join()


def test_watchdog_keeps_50_readers_and_renews_only_own(make_client, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    client = make_client(watchdog_timeout=1.0)
    other = make_client(watchdog_timeout=1.0)
    rw = client.read_write_lock("wd")
    assert other.read_write_lock("wd").read_lock().acquire(lease_time=1.5)  # not renewed
    other_key = f"{{wd}}:{other._runner.owner()}:rwlock_timeout:1"
    lost: list[object] = []
    rw_lost = client.read_write_lock("wd", on_lost=lost.append)
    held = threading.Barrier(51)
    done = threading.Event()
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

    threads = [threading.Thread(target=reader) for _ in range(50)]
    for t in threads:
        t.start()
    try:
        held.wait(timeout=30)
        start = time.monotonic()
        assert wait_until(lambda: r.exists(other_key) == 0, 3)  # the other's hold expired
        time.sleep(max(0.0, 3.5 - (time.monotonic() - start)))  # 3.5 x watchdog_timeout
        assert rw.read_lock().locked()
        assert r.hlen("wd") == 52  # mode, 50 readers and the other's stale field
    finally:
        done.set()
        for t in threads:
            t.join()
    assert results == [(True, False)] * 50 and lost == []
    assert not rw.read_lock().locked()
