"""Paths 1-3: uncontended acquire + release (sync, asyncio) and handoff latency."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import redis
import redis.asyncio

import tenure
from bench import peers
from bench.common import Pair, Results, ainterleave, cycle_us, interleave, p
from bench.common import rounds as rounds_of

# The hand-written floor: the least a lock can send, two scripts of one round trip each.
FLOOR_ACQUIRE = """
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return nil end
return redis.call('pttl', KEYS[1])
"""
FLOOR_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""

TWO_PING = "2xPING"
SCRIPTS = "two-script floor"


def _record(
    results: Results, path: str, samples: dict[str, tuple[list[float], list[float]]], roles: dict
) -> None:
    for name, pair in samples.items():
        results.add(
            path,
            name,
            roles[name],
            "us",
            cycle_us(pair),
            acquire_us=statistics.median(pair[0]) * 1e6,
            release_us=statistics.median(pair[1]) * 1e6,
            n=len(pair[0]),
        )


def uncontended(results: Results, url: str, n: int) -> None:
    """Path 1: every sync contender's acquire + release, interleaved round by round."""
    closers: list[Callable[[], object]] = []
    raw = redis.Redis.from_url(url)
    closers.append(raw.close)
    acquire_sha = raw.script_load(FLOOR_ACQUIRE)
    release_sha = raw.script_load(FLOOR_RELEASE)
    owner = str(uuid.uuid4())

    def floor_acquire() -> None:
        assert raw.evalsha(acquire_sha, 1, "bench:u:floor", owner, 30000) is None

    def floor_release() -> None:
        assert raw.evalsha(release_sha, 1, "bench:u:floor", owner) == 1

    cases: dict[str, Pair] = {
        TWO_PING: (raw.ping, raw.ping),
        SCRIPTS: (floor_acquire, floor_release),
    }
    roles = {TWO_PING: "floor", SCRIPTS: "floor"}
    names = list(peers.TENURE) + peers.available(
        "redis-py Lock", "python-redis-lock", "sherlock", "pottery Redlock (1 master)"
    )
    for name in names:
        acquire, release, close = peers.FACTORIES[name](url, f"bench:u:{name}")
        cases[name] = (acquire, release)
        roles[name] = "tenure" if name in peers.TENURE else "peer"
        closers.append(close)
    try:
        _record(results, "uncontended", interleave(cases, n), roles)
    finally:
        for close in closers:
            close()


def uncontended_async(results: Results, url: str, n: int) -> None:
    """Path 2: asyncio contenders, with redis.asyncio floors and, for reference, sync 2xPING."""

    async def main() -> None:
        sync_raw = redis.Redis.from_url(url)
        raw = redis.asyncio.Redis.from_url(url)
        acquire_sha = await raw.script_load(FLOOR_ACQUIRE)
        release_sha = await raw.script_load(FLOOR_RELEASE)
        owner = str(uuid.uuid4())

        async def floor_acquire() -> None:
            assert await raw.evalsha(acquire_sha, 1, "bench:ua:floor", owner, 30000) is None

        async def floor_release() -> None:
            assert await raw.evalsha(release_sha, 1, "bench:ua:floor", owner) == 1

        client = tenure.AsyncClient(url)
        lock = client.lock("bench:ua:lock")
        fair = client.fair_lock("bench:ua:fair")
        peer_raw = redis.asyncio.Redis.from_url(url)
        rlock = peer_raw.lock("bench:ua:redis-py", timeout=peers.LEASE)
        cases: dict[str, Pair] = {
            TWO_PING + " (redis.asyncio)": (raw.ping, raw.ping),
            SCRIPTS + " (redis.asyncio)": (floor_acquire, floor_release),
            TWO_PING + " (sync redis-py)": (sync_raw.ping, sync_raw.ping),
            "tenure AsyncLock": (lock.acquire, lock.release),
            "tenure AsyncFairLock": (fair.acquire, fair.release),
            "redis.asyncio Lock": (rlock.acquire, rlock.release),
        }
        roles = {k: "floor" for k in list(cases)[:3]}
        roles |= {"tenure AsyncLock": "tenure", "tenure AsyncFairLock": "tenure"}
        roles["redis.asyncio Lock"] = "peer"
        try:
            _record(results, "uncontended-async", await ainterleave(cases, n), roles)
        finally:
            await client.close()
            await raw.aclose()
            await peer_raw.aclose()
            sync_raw.close()

    asyncio.run(main())


# ---------------------------------------------------------------- handoff
def _waiter(subject: str, url: str, name: str, conn: Any) -> None:
    """The waiting side of a handoff, in its own process: on each request, say so, acquire,
    note the time (CLOCK_MONOTONIC, the same clock in every process), release, send it."""
    acquire, release, close = peers.FACTORIES[subject](url, name)
    try:
        while conn.recv():
            conn.send(None)
            acquire()
            stamp = time.perf_counter()
            release()
            conn.send(stamp)
    finally:
        close()


class _Handoff:
    """A holder (this process) and a waiter (another process, its own client) of one lock."""

    def __init__(self, subject: str, url: str, name: str) -> None:
        self.holder = peers.FACTORIES[subject](url, name)
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_waiter, args=(subject, url, name, child), daemon=True)
        self.process.start()
        self.once()  # the waiter's connections and subscription made: not measured

    def once(self) -> tuple[float, float]:
        """One handoff: seconds from the holder's release() call, and from its return, to the
        waiter's acquire() returning."""
        holder_acquire, holder_release, _ = self.holder
        holder_acquire()
        self.conn.send(True)
        if not self.conn.poll(60):
            raise TimeoutError("the waiter process did not start its wait")
        self.conn.recv()
        # The waiter must be asleep in its wait, not still trying: nothing observable says
        # so for every library, so give its first attempt and subscription time.
        time.sleep(0.02)
        called = time.perf_counter()
        holder_release()
        returned = time.perf_counter()
        if not self.conn.poll(60):
            raise TimeoutError("the waiter did not acquire within 60 s of the release")
        stamp = self.conn.recv()
        return stamp - called, stamp - returned

    def close(self) -> None:
        self.holder[2]()
        self.conn.send(False)
        self.process.join(10)


POLLING = {"redis-py Lock", "sherlock"}  # a 0.1 s poll: every fifth round says enough


def handoff(results: Results, url: str, rounds: int) -> None:
    """Path 3: ms from the holder's release() (its return, and its call) to the waiter's
    acquire() returning, the waiter in another process: median, p99 and worst. Every subject
    takes one turn per round, in an order shuffled afresh each round (the same load for all)."""
    names = list(peers.TENURE) + peers.available("python-redis-lock", "redis-py Lock", "sherlock")
    cases = {name: _Handoff(name, url, f"bench:h:{name}") for name in names}
    gaps: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    try:
        for i, order in rounds_of(names, rounds):
            for name in order:
                if name in POLLING and i % 5:
                    continue
                gaps[name].append(cases[name].once())
    finally:
        for case in cases.values():
            case.close()
    for name, pairs in gaps.items():
        from_call = [a for a, _ in pairs]
        from_return = [b for _, b in pairs]
        role, n = peers.role(name), len(pairs)
        for label, values in (("", from_return), ("call_", from_call)):
            results.add("handoff", name, role, f"{label}median_ms", p(values, 0.5) * 1e3, n=n)
            results.add("handoff", name, role, f"{label}p99_ms", p(values, 0.99) * 1e3, n=n)
            results.add("handoff", name, role, f"{label}max_ms", max(values) * 1e3, n=n)


def crash_handoff(results: Results, url: str, rounds: int) -> None:
    """Median ms from a holder's lease end (it never releases) to a waiter holding."""
    closers: list[Callable[[], object]] = []

    def tenure_case(name: str) -> tuple[float, Callable[[], object], Callable[[], object]]:
        a, b = tenure.Client(url), tenure.Client(url)
        closers.extend((a.close, b.close))
        lease = 0.2

        def hold() -> None:
            a.lock(name).acquire(lease_time=lease)

        def take() -> None:
            b.lock(name).acquire()
            b.lock(name).release()

        return lease, hold, take

    def redis_py_case(name: str) -> tuple[float, Callable[[], object], Callable[[], object]]:
        a, b = peers.peer_redis(url), peers.peer_redis(url)
        closers.extend((a.close, b.close))
        lease = 0.2

        def hold() -> None:
            a.lock(name, timeout=lease).acquire()

        def take() -> None:
            lock = b.lock(name, timeout=10)
            lock.acquire()
            lock.release()

        return lease, hold, take

    def prl_case(name: str) -> tuple[float, Callable[[], object], Callable[[], object]]:
        import redis_lock

        a, b = peers.peer_redis(url), peers.peer_redis(url)
        closers.extend((a.close, b.close))
        lease = 1.0  # whole seconds only (SET EX); the waiter's BLPOP waits up to its own expire

        def hold() -> None:
            redis_lock.Lock(a, name, expire=1).acquire()

        def take() -> None:
            lock = redis_lock.Lock(b, name, expire=1)
            lock.acquire()
            lock.release()

        return lease, hold, take

    cases = {"tenure Lock": tenure_case, "redis-py Lock": redis_py_case}
    if peers.installed("redis_lock"):
        cases["python-redis-lock"] = prl_case
    quiet = logging.getLogger("tenure")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # each holder's hold is lost on purpose: no WARNING per round
    for subject, make in cases.items():
        gaps = []
        for i in range(rounds):
            lease, hold, take = make(f"bench:crash:{subject}:{i}")
            hold()
            expires = time.perf_counter() + lease
            take()
            gaps.append(time.perf_counter() - expires)
        role = "tenure" if subject.startswith("tenure") else "peer"
        results.add("crash-handoff", subject, role, "median_ms", statistics.median(gaps) * 1e3)
    quiet.setLevel(level)
    for close in closers:
        close()
