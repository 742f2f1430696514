"""Locks shared by several processes: exclusion, FIFO order, fork, killed holders and waiters."""

from __future__ import annotations

import multiprocessing
import threading
import time
from concurrent.futures import ProcessPoolExecutor

import redis

import tenure
from support.servers import Server
from support.twins import spawn, stamped, wait_until
from support.wire import (
    deadlines,
    max_concurrency,
    overlaps,
    owner_of,
    queue_of,
    server_ms,
    text,
)
from support.workers import (
    count_under_lock,
    fair_queue_in_turn,
    fair_wait,
    fork_and_release,
    hold_forever,
    rw_read_and_die,
    rw_work,
)
from tenure import keys

SPAWN = multiprocessing.get_context("spawn")


# ---------------------------------------------------------------- Lock
def test_exclusion_across_processes_loses_no_update(server, r):
    with SPAWN.Pool(4) as pool:
        results = pool.starmap(count_under_lock, [(server.url, "counter-lock", 50, 2)] * 4)
    assert int(r.get("counter")) == 4 * 2 * 50
    spans = [s for spans in results for s in spans]
    assert overlaps(spans) == 0


def test_fork_child_owns_nothing(server, r):
    with SPAWN.Pool(1) as pool:
        outcome = pool.apply(fork_and_release, (server.url, "forked"))
    assert outcome == "not-owned,NotOwnedError,parent-owned"


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


# ---------------------------------------------------------------- FairLock
WATCHDOG = 3.0
"""A short watchdog_timeout for the liveness tests: renewal period (and a head's grace) 1 s."""


def test_killed_fair_waiter_is_dropped_within_one_renewal_period(
    server: Server, make_client, r: redis.Redis
) -> None:
    """A queued waiter killed with kill -9 (it waits for ever: Redisson's
    5-minute allowance) holds the queue up for one renewal period after its turn comes."""
    lock = make_client(watchdog_timeout=WATCHDOG).fair_lock("dead")
    assert lock.acquire()
    ready = SPAWN.Event()
    proc = SPAWN.Process(target=fair_wait, args=(server.url, "dead", None, ready, WATCHDOG))
    proc.start()
    try:
        assert ready.wait(30)
        assert wait_until(lambda: len(queue_of(r, "dead")) == 1, 30)
        dead_owner = queue_of(r, "dead")[0]
        proc.kill()
        proc.join()
        third = make_client(watchdog_timeout=WATCHDOG).fair_lock("dead")
        job = spawn(stamped, lambda: third.acquire(timeout=5, lease_time=5))
        assert wait_until(lambda: len(queue_of(r, "dead")) == 2)
        released = time.monotonic()
        lock.release()  # wakes the dead head; its turn ends after one renewal period
        acquired, at = job.result()
        delay = at - released
        print(f"live waiter got the lock {delay:.3f} s after the release")
        assert acquired, "the live waiter never got the lock"
        assert delay <= WATCHDOG / 3 + 0.5, f"took {delay:.3f} s after the release"
        assert dead_owner not in queue_of(r, "dead")
        assert dead_owner not in deadlines(r, "dead")
    finally:
        proc.kill()


def test_live_fair_waiters_parked_for_many_periods_keep_their_places(
    make_client, r: redis.Redis
) -> None:
    """Entries last three renewal periods; waiters parked for five keep them, and their
    order, because their clients refresh them."""
    holder = make_client(watchdog_timeout=WATCHDOG).fair_lock("parked")
    assert holder.acquire()  # renewed by the watchdog
    order: list[int] = []
    granted = [threading.Event() for _ in range(2)]

    def wait_in_line(place: int) -> None:
        lock = make_client(watchdog_timeout=WATCHDOG).fair_lock("parked")
        assert lock.acquire(timeout=60)
        order.append(place)
        granted[place].set()
        lock.release()

    jobs = []
    for place in range(2):
        jobs.append(spawn(wait_in_line, place))
        assert wait_until(lambda n=place + 1: len(queue_of(r, "parked")) == n)
    waiters = queue_of(r, "parked")
    joined = deadlines(r, "parked")
    time.sleep(5 * WATCHDOG / 3)  # the point: time passes, five renewal periods
    assert queue_of(r, "parked") == waiters
    now = server_ms(r)
    later = deadlines(r, "parked")
    for waiter in waiters:  # refreshed: each still runs out in the future, later than at first
        assert later[waiter] > now
        assert later[waiter] > joined[waiter] + WATCHDOG * 1000
    released = time.monotonic()
    holder.release()
    assert granted[0].wait(10)
    assert time.monotonic() - released < 1.0
    for job in jobs:
        job.result()
    assert order == [0, 1]


def test_fifo_across_four_processes(server: Server, client: tenure.Client, r: redis.Redis) -> None:
    lock = client.fair_lock("procs")
    assert lock.acquire()
    turns = [SPAWN.Queue() for _ in range(4)]
    dones = [SPAWN.Event() for _ in range(4)]
    procs = [
        SPAWN.Process(target=fair_queue_in_turn, args=(server.url, "procs", q, d))
        for q, d in zip(turns, dones, strict=True)
    ]
    for p in procs:
        p.start()
    try:
        # 12 waiters joining round-robin over the 4 processes, each once the previous queued
        for place in range(12):
            turns[place % 4].put(place)
            assert wait_until(lambda n=place + 1: r.llen(keys.fair_queue_key("procs")) == n, 30)
        for q in turns:
            q.put(None)
        lock.release()
        for d in dones:
            assert d.wait(60)
        assert [int(x) for x in r.lrange("order", 0, -1)] == list(range(12))
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()


# ---------------------------------------------------------------- ReadWriteLock
def test_readers_overlap_writers_exclusive_across_processes(server: Server, r: redis.Redis) -> None:
    start_all = SPAWN.Manager().Event()
    jobs = [(False, 4, 4), (False, 4, 4), (True, 10, 1), (True, 10, 1)]  # writer, rounds, threads
    with ProcessPoolExecutor(len(jobs), mp_context=SPAWN) as pool:
        futures = [
            pool.submit(rw_work, server.url, "shared", writer, rounds, threads, start_all)
            for writer, rounds, threads in jobs
        ]
        start_all.set()
        results = [f.result(timeout=90) for f in futures]
    reads = results[0] + results[1]
    writes = results[2] + results[3]
    assert len(reads) == 32
    assert len(writes) == 20
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
        ours = f"{{dead}}:{owner_of(r, 'dead', client.client_id)}:"
        writer = spawn(stamped, lambda: rw.write_lock().acquire(timeout=20))
        dead_keys = [k for k in r.keys("{dead}:*") if not text(k).startswith(ours)]
        assert len(dead_keys) == 1
        assert wait_until(lambda: r.exists(*dead_keys) == 0, 5)  # gone after its 1 s lease
        assert r.pttl("dead") > 20_000  # while our 30 s hold keeps the lock
        released = time.monotonic()
        rw.read_lock().release()  # the dead reader's field no longer counts
        acquired, at = writer.result()
        assert acquired
        assert at - released < 1.0
    finally:
        proc.kill()
        proc.join()
