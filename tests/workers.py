"""Functions run in child processes (spawned: importable by name, arguments picklable)."""

from __future__ import annotations

import os
import time

import redis

import tenure


def count_under_lock(url: str, name: str, rounds: int, threads: int = 1) -> list[tuple[int, int]]:
    """Increment ``counter`` non-atomically under the lock; returns (enter, exit) ns stamps."""
    import threading

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

        pool = [threading.Thread(target=work) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        raw.close()
    return spans


def hold_forever(url: str, name: str, watchdog_timeout: float, ready: object) -> None:
    """Take the lock under the watchdog, signal, then sleep until killed."""
    client = tenure.Client(url, watchdog_timeout=watchdog_timeout)
    client.lock(name).acquire()
    ready.set()  # type: ignore[attr-defined]
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
