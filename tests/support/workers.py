"""Functions run in child processes (spawned: importable by name, arguments picklable)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

import tenure


def run_threads(work: Callable[[], None], threads: int) -> None:
    """Run ``work`` in ``threads`` threads at once and wait for all of them."""
    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()


def count_under_lock(url: str, name: str, rounds: int, threads: int = 1) -> list[tuple[int, int]]:
    """Increment ``counter`` non-atomically under the lock; returns (enter, exit) ns stamps."""
    spans: list[tuple[int, int]] = []
    with tenure.Client(url) as client:
        raw = redis.Redis.from_url(url)
        lock = client.lock(name)

        def work() -> None:
            for _ in range(rounds):
                with lock:
                    enter = time.monotonic_ns()
                    value = int(raw.get("counter") or 0)
                    raw.set("counter", value + 1)
                    spans.append((enter, time.monotonic_ns()))

        run_threads(work, threads)
        raw.close()
    return spans


def hold_forever(url: str, name: str, watchdog_timeout: float, ready: Any) -> None:
    """Take the lock under the watchdog, signal, then sleep until killed."""
    client = tenure.Client(url, watchdog_timeout=watchdog_timeout)
    client.lock(name).acquire()
    ready.set()
    time.sleep(3600)


def fork_and_release(url: str, name: str) -> str:
    """Acquire in this process, fork, and report what the child's release did."""
    client = tenure.Client(url)
    lock = client.lock(name)
    lock.acquire()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            outcome = "owned" if lock.owned() else "not-owned"
            try:
                lock.release()
                outcome += ",released"
            except tenure.NotOwnedError:
                outcome += ",NotOwnedError"
            os.write(write, outcome.encode())
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    os.close(write)
    outcome = os.read(read, 100).decode()
    outcome += ",parent-owned" if lock.owned() else ",parent-lost"
    lock.release()
    client.close()
    return outcome


def fair_queue_in_turn(url: str, name: str, turns: Any, done: Any) -> None:
    """For each index received on ``turns``: a thread records its place in line (the
    index), then waits for the fair lock; once granted it appends its place to ``order``,
    holds briefly and releases. ``None`` ends the process once all its threads finished."""
    with tenure.Client(url) as client:
        raw = redis.Redis.from_url(url)
        lock = client.fair_lock(name)
        threads = []

        def wait_in_line(place: int) -> None:
            assert lock.acquire(timeout=60)
            raw.rpush("order", place)
            time.sleep(0.01)
            lock.release()

        while (place := turns.get()) is not None:
            t = threading.Thread(target=wait_in_line, args=(place,))
            t.start()
            threads.append(t)
        for t in threads:
            t.join()
        raw.close()
    done.set()


def fair_wait(
    url: str, name: str, timeout: float | None, ready: Any, watchdog_timeout: float = 30.0
) -> None:
    """Wait for the fair lock with ``timeout`` (None: for ever) until killed."""
    client = tenure.Client(url, watchdog_timeout=watchdog_timeout)
    ready.set()
    client.fair_lock(name).acquire(timeout=timeout)
    time.sleep(3600)


def rw_work(
    url: str, name: str, writer: bool, rounds: int, threads: int, start: Any
) -> list[tuple[int, int]]:
    """``threads`` threads take the read or write side ``rounds`` times each; returns the
    (enter, exit) monotonic ns spans (CLOCK_MONOTONIC: comparable across processes).

    Server counters ``readers``/``writers`` check exclusion from inside: a writer must find
    itself alone, a reader must find no writer; each breach increments ``violations``.
    """
    spans: list[tuple[int, int]] = []
    with tenure.Client(url) as client:
        raw = redis.Redis.from_url(url)
        rw = client.read_write_lock(name)
        side = rw.write_lock() if writer else rw.read_lock()

        def work() -> None:
            for _ in range(rounds):
                with side(timeout=60):
                    enter = time.monotonic_ns()
                    if writer:
                        if raw.incr("writers") != 1 or int(raw.get("readers") or 0) != 0:
                            raw.incr("violations")
                        time.sleep(0.005)
                        raw.decr("writers")
                    else:
                        raw.incr("readers")
                        if int(raw.get("writers") or 0) != 0:
                            raw.incr("violations")
                        time.sleep(0.02)
                        raw.decr("readers")
                    spans.append((enter, time.monotonic_ns()))

        start.wait()
        run_threads(work, threads)
        raw.close()
    return spans


def rw_read_and_die(url: str, name: str, lease: float, ready: Any) -> None:
    """Take a read hold with ``lease`` seconds, signal, then sleep until killed."""
    client = tenure.Client(url)
    client.read_write_lock(name).read_lock().acquire(lease_time=lease)
    ready.set()
    time.sleep(3600)


def semaphore_spans(url: str, name: str, rounds: int, threads: int) -> list[tuple[int, int]]:
    """Enter the semaphore ``rounds`` times in each of ``threads`` threads; (enter, exit)
    monotonic ns stamps of every stay inside."""
    spans: list[tuple[int, int]] = []
    with tenure.Client(url) as client:
        sem = client.semaphore(name)

        def work() -> None:
            for _ in range(rounds):
                with sem:
                    enter = time.monotonic_ns()
                    time.sleep(0.002)
                    spans.append((enter, time.monotonic_ns()))

        run_threads(work, threads)
    return spans


def hold_permit_forever(url: str, name: str, watchdog_timeout: float, ready: Any) -> None:
    """Take a permit without lease_time (renewed by the watchdog), signal, sleep until killed."""
    client = tenure.Client(url, watchdog_timeout=watchdog_timeout)
    assert client.permit_expirable_semaphore(name).acquire() is not None
    ready.set()
    time.sleep(3600)

def contend_through_failover(url: str, name: str, seconds: float) -> list[tuple[int, int]]:
    """For ``seconds``, take ``name`` with ``wait_for_replicas=1`` and hold it briefly;
    returns the (enter, exit) ns stamps of grants the replica acknowledged. Errors while the
    shard fails over (connection refused, no replica yet) are retried."""
    spans: list[tuple[int, int]] = []
    end = time.monotonic() + seconds
    with tenure.Client(
        url, wait_for_replicas=1, replica_timeout=0.3, socket_timeout=1, socket_connect_timeout=1
    ) as client:
        lock = client.lock(name)
        while time.monotonic() < end:
            try:
                if not lock.acquire(timeout=1, lease_time=5):
                    continue
            except tenure.LockError:  # BackendError, ReplicationError (grant undone)
                time.sleep(0.02)
                continue
            enter = time.monotonic_ns()
            time.sleep(0.005)
            leave = time.monotonic_ns()
            spans.append((enter, leave))
            # A failed release leaves the hold until its lease ends: that only delays the
            # others. (The span above ended before the release was sent.)
            with contextlib.suppress(tenure.LockError):
                lock.release()
    return spans
