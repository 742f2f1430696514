"""Waiting paths (handoff, contention, many waiters), tenure next to python-redis-lock in one run.

    python bench/waiting_probe.py [--url redis://...] [--quick] [--only handoff,contention,many]

- handoff: median ms from the holder's release() call to the waiting thread (another client)
  holding; rounds of the two libraries interleaved so both see the same load.
- contention: P processes (one client each) take one lock in a loop for a few seconds:
  acquisitions/s, Jain's fairness index over the per-process counts, and server commands per
  acquisition (INFO commandstats delta, Lua's calls included).
- many waiters: 500 threads of one client wait on a lock another client holds (watchdog
  renewals every ``--renewal`` s): commands sent by the waiters' client while they wait,
  the waiters' connections, then the time to drain them (each acquires once, then releases).

Nothing is asserted; the targets are printed beside the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import statistics
import threading
import time
from collections.abc import Callable

import redis
import redis_lock

import tenure
from tenure.embedded import embedded_server


# ---------------------------------------------------------------- handoff
def _handoff_once(
    holder: tuple[Callable[[], object], Callable[[], object]],
    waiter: tuple[Callable[[], object], Callable[[], object]],
) -> float:
    holder[0]()
    ready = threading.Event()
    stamp: list[float] = []

    def wait() -> None:
        ready.set()
        waiter[0]()
        stamp.append(time.perf_counter())
        waiter[1]()

    t = threading.Thread(target=wait)
    t.start()
    ready.wait()
    time.sleep(0.02)  # the waiter is asleep: we measure the wake-up, not the start
    released = time.perf_counter()
    holder[1]()
    t.join(30)
    return stamp[0] - released


def handoff(url: str, rounds: int) -> dict[str, float]:
    a, b = tenure.Client(url), tenure.Client(url)
    ours = [(a.lock("probe:h").acquire, a.lock("probe:h").release),
            (b.lock("probe:h").acquire, b.lock("probe:h").release)]
    ra, rb = redis.Redis.from_url(url), redis.Redis.from_url(url)
    la = redis_lock.Lock(ra, "probe:h-prl", expire=30)
    lb = redis_lock.Lock(rb, "probe:h-prl", expire=30)
    theirs = [(la.acquire, la.release), (lb.acquire, lb.release)]
    gaps: dict[str, list[float]] = {"tenure": [], "python-redis-lock": []}
    for _ in range(rounds):
        gaps["tenure"].append(_handoff_once(ours[0], ours[1]))
        gaps["python-redis-lock"].append(_handoff_once(theirs[0], theirs[1]))
    a.close()
    b.close()
    return {k: statistics.median(v) * 1e3 for k, v in gaps.items()}


# ---------------------------------------------------------------- contention
def _contend(url: str, lib: str, name: str, start: float, seconds: float, out: object) -> None:
    count = 0
    if lib == "tenure":
        with tenure.Client(url) as client:
            lock = client.lock(name)
            while time.time() < start:
                time.sleep(0.001)
            while time.time() < start + seconds:
                with lock:
                    count += 1
    else:
        conn = redis.Redis.from_url(url)
        lock = redis_lock.Lock(conn, name, expire=30)
        while time.time() < start:
            time.sleep(0.001)
        while time.time() < start + seconds:
            lock.acquire()
            count += 1
            lock.release()
    out.put(count)  # type: ignore[attr-defined]


def _commands(raw: redis.Redis) -> int:
    stats = raw.info("commandstats")
    return sum(int(v["calls"]) for v in stats.values())


def contention(url: str, lib: str, procs: int, seconds: float) -> tuple[float, float, float]:
    """(acquisitions/s, Jain's index, server commands per acquisition)."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    raw = redis.Redis.from_url(url)
    start = time.time() + 2.0
    name = f"probe:c{procs}:{lib}:{time.time_ns()}"
    ps = [ctx.Process(target=_contend, args=(url, lib, name, start, seconds, out))
          for _ in range(procs)]
    for p in ps:
        p.start()
    while time.time() < start - 0.05:
        time.sleep(0.005)
    before = _commands(raw)
    counts = [out.get(timeout=120) for _ in ps]
    after = _commands(raw)
    for p in ps:
        p.join()
    raw.close()
    total = sum(counts)
    jain = total**2 / (len(counts) * sum(c * c for c in counts)) if total else 0.0
    # The window of the delta is a little wider than the timed one (process start/stop).
    return total / seconds, jain, (after - before) / max(total, 1)


# ---------------------------------------------------------------- many waiters
def _conns(raw: redis.Redis) -> dict[str, dict[str, str]]:
    return {c["id"]: c for c in raw.client_list()}


def many_tenure(url: str, waiters: int, idle: float, renewal: float) -> tuple[int, int, float]:
    """(commands from the waiters' client while idle, its connections, drain seconds)."""
    raw = redis.Redis.from_url(url)
    holder = tenure.Client(url, watchdog_timeout=3 * renewal)
    holder.lock("probe:many").acquire()
    mine = set(_conns(raw))
    client = tenure.Client(url)
    done = threading.Barrier(waiters + 1)
    acquired = [0]
    guard = threading.Lock()

    def wait() -> None:
        lock = client.lock("probe:many")
        if lock.acquire(timeout=120):
            with guard:
                acquired[0] += 1
            lock.release()
        done.wait()

    threads = [threading.Thread(target=wait, daemon=True) for _ in range(waiters)]
    for t in threads:
        t.start()
    time.sleep(2.0)  # every waiter subscribed and asleep
    first = {k: int(c["tot-cmds"]) for k, c in _conns(raw).items() if k not in mine}
    time.sleep(idle)
    conns = {k: c for k, c in _conns(raw).items() if k not in mine}
    idle_cmds = sum(int(c["tot-cmds"]) - first.get(k, 0) for k, c in conns.items())
    start = time.perf_counter()
    holder.lock("probe:many").release()
    done.wait(120)
    drain = time.perf_counter() - start
    peak = len([k for k in _conns(raw) if k not in mine])
    assert acquired[0] == waiters, acquired
    client.close()
    holder.close()
    raw.close()
    return idle_cmds, max(len(conns), peak), drain


def many_prl(url: str, waiters: int) -> tuple[int, float]:
    """(connections of the waiters' client, drain seconds) for python-redis-lock."""
    raw = redis.Redis.from_url(url)
    holder = redis_lock.Lock(redis.Redis.from_url(url), "probe:many-prl", expire=30)
    holder.acquire()
    mine = set(_conns(raw))
    conn = redis.Redis.from_url(url, max_connections=2 * waiters)  # a blocked BLPOP each
    done = threading.Barrier(waiters + 1)

    def wait() -> None:
        lock = redis_lock.Lock(conn, "probe:many-prl", expire=120)
        lock.acquire(timeout=120)
        lock.release()
        done.wait()

    threads = [threading.Thread(target=wait, daemon=True) for _ in range(waiters)]
    for t in threads:
        t.start()
    time.sleep(2.0)
    conns = len([k for k in _conns(raw) if k not in mine])
    start = time.perf_counter()
    holder.release()
    done.wait(120)
    drain = time.perf_counter() - start
    raw.close()
    return conns, drain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default="handoff,contention,many")
    parser.add_argument("--renewal", type=float, default=0.5)
    parser.add_argument("--procs", type=int, nargs="+", default=[2, 4, 8])
    args = parser.parse_args()
    only = set(args.only.split(","))
    rounds = 40 if args.quick else 150
    seconds = 2.0 if args.quick else 4.0
    server = embedded_server() if args.url is None else contextlib.nullcontext(args.url)
    with server as url:
        if "handoff" in only:
            h = handoff(url, rounds)
            print(f"handoff median ms: tenure {h['tenure']:.3f}  python-redis-lock "
                  f"{h['python-redis-lock']:.3f}  ratio {h['tenure'] / h['python-redis-lock']:.2f}"
                  "  (target <= 1.2)")
        if "contention" in only:
            print("contention   lib                 acq/s   Jain  cmds/acq  (targets: >= peer,"
                  " Jain >= 0.95, <= 12 cmds)")
            for procs in args.procs:
                for lib in ("tenure", "python-redis-lock"):
                    rate, jain, cmds = contention(url, lib, procs, seconds)
                    print(f"  P={procs}       {lib:18} {rate:7.0f}  {jain:.3f}  {cmds:6.1f}")
        if "many" in only:
            n = 500
            cmds, conns, drain = many_tenure(url, n, 3.0, args.renewal)
            print(f"{n} waiters: tenure idle commands in 3 s {cmds} (holder renews every "
                  f"{args.renewal} s), waiter connections {conns}, drain {drain:.3f} s",
                  flush=True)
            pconns, pdrain = many_prl(url, n)
            print(f"{n} waiters: python-redis-lock connections {pconns}, drain {pdrain:.3f} s"
                  "  (target: tenure drain <= this, 0 idle commands, no pool of 100)")


if __name__ == "__main__":
    main()
