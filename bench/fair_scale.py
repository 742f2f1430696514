"""FairLock at scale: server commands per acquisition with many waiters, and contended
throughput next to python-redis-lock, in one run on one embedded Valkey.

    python bench/fair_scale.py [--url redis://...] [--tasks 1000] [--procs 8] [--seconds 3]
                               [--rounds 3]

- ``tasks``: that many asyncio tasks of one client queue on one FairLock at once; each takes
  it once and releases it. Commands are the INFO commandstats delta (every ``cmdstat_*``
  call, those Lua scripts make included), divided by the acquisitions.
- ``procs``: that many processes acquire and release one lock in a loop for ``seconds``:
  tenure's FairLock, then python-redis-lock's Lock (the ``bench`` extra), acquisitions/s;
  ``rounds`` alternating rounds, the median of each (the machine may be shared).

Needs ``tenure[bench]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import multiprocessing
import statistics
import time
from typing import Any

import redis

import tenure
from tenure.embedded import embedded_server


def command_calls(r: redis.Redis) -> int:
    stats: dict[str, Any] = r.info("commandstats")
    return sum(int(v["calls"]) for v in stats.values())


def many_waiters(url: str, tasks: int) -> tuple[float, float]:
    """(server commands per acquisition, seconds) for ``tasks`` tasks taking one FairLock."""
    r = redis.Redis.from_url(url)

    async def main() -> float:
        async with tenure.AsyncClient(url) as client:
            lock = client.fair_lock(f"bench:fair-scale:{time.time_ns()}")
            done = [0]

            async def one() -> None:
                async with lock(timeout=600):
                    done[0] += 1
                    await asyncio.sleep(0)

            start = time.monotonic()
            await asyncio.gather(*(one() for _ in range(tasks)))
            assert done[0] == tasks
            return time.monotonic() - start

    before = command_calls(r)
    elapsed = asyncio.run(main())
    after = command_calls(r) - 1  # less the first INFO
    r.close()
    return (after - before) / tasks, elapsed


def _timed_loop(
    lock: Any, raw: redis.Redis, name: str, start: float, seconds: float, order: bool
) -> list[int] | int:
    """Take ``lock`` again and again from epoch ``start`` for ``seconds``: the count, or with
    ``order`` the global sequence number of each of this process's acquisitions."""
    seqs: list[int] = []
    while time.time() < start:
        time.sleep(0.001)
    count = 0
    while time.time() < start + seconds:
        with lock:
            count += 1
            if order:
                seqs.append(int(raw.incr(name + ":seq")))
    return seqs if order else count


def _fair_loop(
    url: str, name: str, start: float, seconds: float, out: Any, order: bool = False
) -> None:
    with redis.Redis.from_url(url) as raw, tenure.Client(url) as client:
        out.put(_timed_loop(client.fair_lock(name), raw, name, start, seconds, order))


def _prl_loop(
    url: str, name: str, start: float, seconds: float, out: Any, order: bool = False
) -> None:
    import redis_lock  # python-redis-lock

    with redis.Redis.from_url(url) as raw:
        lock = redis_lock.Lock(raw, name, expire=30)
        out.put(_timed_loop(lock, raw, name, start, seconds, order))


def contended(url: str, procs: int, seconds: float, target: Any) -> tuple[float, float]:
    """(acquisitions/s, server commands per acquisition) of ``procs`` processes."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    start = time.time() + 2.0
    name = f"bench:fair-contended:{time.time_ns()}"
    r = redis.Redis.from_url(url)
    ps = [ctx.Process(target=target, args=(url, name, start, seconds, out)) for _ in range(procs)]
    for p in ps:
        p.start()
    while time.time() < start:
        time.sleep(0.001)
    before = command_calls(r)
    counts = [out.get(timeout=120) for _ in ps]
    after = command_calls(r) - 1
    for p in ps:
        p.join()
    r.close()
    total = sum(counts)
    return total / seconds, (after - before) / max(total, 1)


def repeats(url: str, procs: int, seconds: float, target: Any) -> float:
    """Share of acquisitions that went to the process that held the lock just before (a
    FIFO lock hands every one over; a lock that lets the releaser take it again does not)."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    start = time.time() + 2.0
    name = f"bench:fair-order:{time.time_ns()}"
    ps = [
        ctx.Process(target=target, args=(url, name, start, seconds, out, True))
        for _ in range(procs)
    ]
    for p in ps:
        p.start()
    runs = [out.get(timeout=120) for _ in ps]
    for p in ps:
        p.join()
    by_seq = {seq: i for i, seqs in enumerate(runs) for seq in seqs}
    order = [by_seq[seq] for seq in sorted(by_seq)]
    same = sum(a == b for a, b in itertools.pairwise(order))
    return same / max(len(order) - 1, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default=None)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--procs", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        url = args.url or stack.enter_context(embedded_server())
        per, elapsed = many_waiters(url, args.tasks)
        print(f"{args.tasks} asyncio tasks on one FairLock: {per:.1f} server commands per "
              f"acquisition, {elapsed:.2f} s in all")
        targets = {"tenure FairLock": _fair_loop, "python-redis-lock": _prl_loop}
        results: dict[str, list[tuple[float, float]]] = {label: [] for label in targets}
        for _ in range(args.rounds):
            for label, target in targets.items():
                results[label].append(contended(url, args.procs, args.seconds, target))
        for label, runs in results.items():
            rate = statistics.median(r for r, _ in runs)
            cmds = statistics.median(c for _, c in runs)
            print(f"{label}, {args.procs} processes: {rate:,.0f} acquisitions/s (median of "
                  f"{args.rounds}: {', '.join(f'{r:,.0f}' for r, _ in runs)}), {cmds:.1f} "
                  f"server commands per acquisition")
        for label, target in targets.items():
            share = repeats(url, args.procs, args.seconds, target)
            print(f"{label}: {100 * share:.1f} % of acquisitions by the process that released "
                  "just before")

if __name__ == "__main__":
    main()
