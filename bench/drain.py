"""Many waiters released at once: a 1-permit semaphore drained, a latch opened.

- Semaphore drain: a holder (its own client) takes the only permit; 100 threads of one other
  client wait for it; the holder releases. Each waiter takes the permit once and gives it back.
  Figures: the first grant and the last release's return after the holder's release call, and
  server commands per acquisition over the drain (INFO commandstats, script-inner calls
  included). tenure's Semaphore and PermitExpirableSemaphore beside redis-semaphore (BLPOP).
- Latch: 100 threads of one client wait on a CountDownLatch of count 1; another client counts
  it down. Figure: from the count_down() call to the last wait() returning. The floor: one
  pub/sub reader thread (redis-py) that sets a threading.Event the 100 threads wait on, woken
  by a PUBLISH from another connection.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

import tenure
from bench import peers
from bench.common import Results, calls_delta, command_calls

PARK = 1.0  # seconds for every waiter to be asleep in its wait (nothing observable for all)

Call = Callable[[], object]
Side = tuple[Call, Callable[[], tuple[Call, Call]], Call]
"""(release the holder's permit, make one waiter's (acquire, release), close)."""


def _tenure_semaphore(url: str, name: str, _waiters: int) -> Side:
    holder, waiters = tenure.Client(url), tenure.Client(url)
    sem = holder.semaphore(name)
    sem.set_permits(1)
    sem.acquire()

    def waiter() -> tuple[Callable[[], object], Callable[[], object]]:
        mine = waiters.semaphore(name)
        return mine.acquire, mine.release

    def close() -> None:
        holder.close()
        waiters.close()

    return sem.release, waiter, close


def _tenure_permits(url: str, name: str, _waiters: int) -> Side:
    holder, waiters = tenure.Client(url), tenure.Client(url)
    sem = holder.permit_expirable_semaphore(name)
    sem.set_permits(1)
    held = sem.acquire()
    assert held is not None

    def waiter() -> tuple[Callable[[], object], Callable[[], object]]:
        mine = waiters.permit_expirable_semaphore(name)
        taken: list[str] = []

        def acquire() -> None:
            permit = mine.acquire()
            assert permit is not None
            taken.append(permit)

        return acquire, lambda: mine.release(taken.pop())

    def close() -> None:
        holder.close()
        waiters.close()

    return lambda: sem.release(held), waiter, close


def _redis_semaphore(url: str, name: str, waiters_count: int) -> Side:
    import redis_semaphore

    holder = peers.peer_redis(url)
    # every waiter blocks one connection in BLPOP: the pool must hold them all
    waiters = peers.peer_redis(url, max_connections=waiters_count + 10)
    sem = redis_semaphore.Semaphore(holder, count=1, namespace=name)
    sem.acquire()

    def waiter() -> tuple[Callable[[], object], Callable[[], object]]:
        mine = redis_semaphore.Semaphore(waiters, count=1, namespace=name)
        return mine.acquire, mine.release

    def close() -> None:
        holder.close()
        waiters.close()

    return sem.release, waiter, close


SEMAPHORES: dict[str, tuple[str | None, Callable[[str, str, int], Side]]] = {
    "tenure Semaphore": (None, _tenure_semaphore),
    "tenure PermitExpirableSemaphore": (None, _tenure_permits),
    "redis-semaphore": ("redis_semaphore", _redis_semaphore),
}


def _drain_once(url: str, make: Callable[[str, str, int], Side], waiters: int) -> dict[str, Any]:
    name = f"bench:sem:{time.time_ns()}"
    release_holder, make_waiter, close = make(url, name, waiters)
    granted: list[float] = []
    done: list[float] = []
    failures: list[BaseException] = []
    started = threading.Semaphore(0)

    def wait(acquire: Callable[[], object], release: Callable[[], object]) -> None:
        started.release()
        try:
            acquire()
            granted.append(time.perf_counter())
            release()
            done.append(time.perf_counter())
        except BaseException as error:  # counted below, not lost in a thread
            failures.append(error)

    threads = [threading.Thread(target=wait, args=make_waiter()) for _ in range(waiters)]
    for t in threads:
        t.start()
    for _ in threads:
        started.acquire()
    time.sleep(PARK)
    raw = redis.Redis.from_url(url)
    before = command_calls(raw)
    t0 = time.perf_counter()
    release_holder()
    for t in threads:
        t.join(120)
    after = command_calls(raw)
    raw.close()
    close()
    delta = calls_delta(before, after)
    ok = len(done) == waiters
    return {
        "first_ms": (min(granted) - t0) * 1e3 if granted else float("inf"),
        "all_ms": (max(done) - t0) * 1e3 if ok else float("inf"),
        "cmds_per_acq": sum(delta.values()) / len(done) if done else float("inf"),
        "failures": [repr(f) for f in failures[:3]],
    }


def semaphore_drain(results: Results, url: str, waiters: int, reps: int) -> None:
    for subject, (module, make) in SEMAPHORES.items():
        if not peers.installed(module):
            continue
        try:
            runs = [_drain_once(url, make, waiters) for _ in range(reps)]
        except (AttributeError, TypeError) as error:  # an older tenure without this API
            print(f"  skipped {subject}: {error!r}")
            continue
        role = peers.role(subject)
        failures = [f for r in runs for f in r["failures"]]
        for metric in ("first_ms", "all_ms", "cmds_per_acq"):
            value = statistics.median(r[metric] for r in runs)
            results.add("semaphore-drain", subject, role, metric, value,
                        waiters=waiters, reps=reps, failures=failures[:3])  # fmt: skip


def _latch_once(url: str, waiters: int) -> dict[str, float]:
    name = f"bench:latch:{time.time_ns()}"
    opener, clients = tenure.Client(url), tenure.Client(url)
    latch = opener.count_down_latch(name)
    assert latch.try_set_count(1)
    stamps = _wait_all(waiters, lambda: clients.count_down_latch(name).wait(60), latch.count_down)
    opener.close()
    clients.close()
    return stamps


def _floor_once(url: str, waiters: int) -> dict[str, float]:
    channel = f"bench:latch-floor:{time.time_ns()}"
    r = redis.Redis.from_url(url)
    sub = r.pubsub(ignore_subscribe_messages=True)
    sub.subscribe(channel)
    event, stop = threading.Event(), threading.Event()

    def read() -> None:
        while not stop.is_set():
            if sub.get_message(timeout=0.2) is not None:
                event.set()

    reader = threading.Thread(target=read)
    reader.start()
    publisher = redis.Redis.from_url(url)
    try:
        return _wait_all(waiters, lambda: event.wait(60), lambda: publisher.publish(channel, "0"))
    finally:
        stop.set()
        reader.join()
        sub.close()
        r.close()
        publisher.close()


def _wait_all(waiters: int, wait: Call, open_: Call) -> dict[str, float]:
    stamps: list[float] = []
    started = threading.Semaphore(0)

    def one() -> None:
        started.release()
        if wait():
            stamps.append(time.perf_counter())

    threads = [threading.Thread(target=one) for _ in range(waiters)]
    for t in threads:
        t.start()
    for _ in threads:
        started.acquire()
    time.sleep(PARK)
    t0 = time.perf_counter()
    open_()
    for t in threads:
        t.join(90)
    ok = len(stamps) == waiters
    return {
        "first_ms": (min(stamps) - t0) * 1e3 if stamps else float("inf"),
        "last_ms": (max(stamps) - t0) * 1e3 if ok else float("inf"),
    }


def latch(results: Results, url: str, waiters: int, reps: int) -> None:
    for subject, once, role in (
        ("tenure CountDownLatch", _latch_once, "tenure"),
        ("pub/sub reader + Event floor", _floor_once, "floor"),
    ):
        runs = [once(url, waiters) for _ in range(reps)]
        for metric in ("first_ms", "last_ms"):
            value = statistics.median(r[metric] for r in runs)
            results.add("latch", subject, role, metric, value, waiters=waiters, reps=reps)
