"""tenure benchmarks: one command, one embedded server, figures measured side by side.

    python bench/run.py [--url redis://...] [--quick]

Prints ratios to a PING round trip measured in the same run, handoff latencies, contended
throughput with Jain's fairness index, idle-waiter traffic, pub/sub connections per client and
memory per held lock, next to peer libraries where they offer the same operation. Nothing here
is asserted; targets from the issues are printed beside the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import multiprocessing
import statistics
import sys
import threading
import time
from collections.abc import Callable

import redis
import redis.asyncio
from rich.console import Console
from rich.table import Table

import tenure
from tenure import keys
from tenure.embedded import embedded_server

console = Console()


def paired_us(fn: Callable[[], object], ping: Callable[[], object], n: int) -> tuple[float, float]:
    """Medians (µs) of ``fn`` and of ``ping``, sampled alternately so both see the same load.

    On two shared cores the machine's load drifts within seconds; interleaving keeps the
    ratio honest where two separate runs would not.
    """
    for _ in range(min(50, n)):
        fn()
        ping()
    ours, pings = [], []
    for _ in range(n):
        start = time.perf_counter()
        ping()
        middle = time.perf_counter()
        fn()
        ours.append(time.perf_counter() - middle)
        pings.append(middle - start)
    return statistics.median(ours) * 1e6, statistics.median(pings) * 1e6


async def apaired_us(
    fn: Callable[[], object], ping: Callable[[], object], n: int
) -> tuple[float, float]:
    """asyncio twin of :func:`paired_us`."""
    for _ in range(min(50, n)):
        await fn()  # type: ignore[misc]
        await ping()  # type: ignore[misc]
    ours, pings = [], []
    for _ in range(n):
        start = time.perf_counter()
        await ping()  # type: ignore[misc]
        middle = time.perf_counter()
        await fn()  # type: ignore[misc]
        ours.append(time.perf_counter() - middle)
        pings.append(middle - start)
    return statistics.median(ours) * 1e6, statistics.median(pings) * 1e6


# ---------------------------------------------------------------- uncontended
def uncontended(url: str, n: int) -> list[tuple[str, float, float]]:
    """(library, acquire+release µs, ratio to 2xPING) for the sync APIs."""
    raw = redis.Redis.from_url(url)
    rows = []

    def row(name: str, fn: Callable[[], object]) -> None:
        us, ping = paired_us(fn, raw.ping, n)
        rows.append((name, us, us / (2 * ping)))

    with tenure.Client(url) as client:
        lock = client.lock("bench:u")

        def tenure_cycle() -> None:
            lock.acquire()
            lock.release()

        def tenure_lease_cycle() -> None:
            lock.acquire(lease_time=10)
            lock.release()

        row("tenure Lock (watchdog)", tenure_cycle)
        row("tenure Lock (lease_time)", tenure_lease_cycle)
        sem = client.semaphore("bench:sem")
        sem.set_permits(1)

        def semaphore_cycle() -> None:
            sem.acquire()
            sem.release()

        row("tenure Semaphore", semaphore_cycle)
        psem = client.permit_expirable_semaphore("bench:psem")
        psem.set_permits(1)

        def permit_cycle() -> None:
            permit = psem.acquire(lease_time=10)
            assert permit is not None
            psem.release(permit)

        row("tenure PermitExpirableSemaphore (lease_time)", permit_cycle)
    rlock = raw.lock("bench:redis-py", timeout=10)

    def redispy_cycle() -> None:
        rlock.acquire()
        rlock.release()

    row("redis-py Lock", redispy_cycle)
    with contextlib.suppress(ImportError):
        import redis_lock  # python-redis-lock

        plock = redis_lock.Lock(raw, "bench:python-redis-lock", expire=10)

        def prl_cycle() -> None:
            plock.acquire()
            plock.release()

        row("python-redis-lock", prl_cycle)
    with contextlib.suppress(ImportError):
        from pottery import Redlock

        potlock = Redlock(key="bench:pottery", masters={raw}, auto_release_time=10)

        def pottery_cycle() -> None:
            potlock.acquire()
            potlock.release()

        row("pottery Redlock (1 master)", pottery_cycle)
    raw.close()
    return rows


def uncontended_async(url: str, n: int) -> list[tuple[str, float, float]]:
    async def main() -> list[tuple[str, float, float]]:
        raw = redis.asyncio.Redis.from_url(url)
        rows = []
        async with tenure.AsyncClient(url) as client:
            lock = client.lock("bench:ua")

            async def cycle() -> None:
                await lock.acquire()
                await lock.release()

            t, ping = await apaired_us(cycle, raw.ping, n)
            rows.append(("tenure AsyncLock (watchdog)", t, t / (2 * ping)))
        rlock = raw.lock("bench:redis-py-async", timeout=10)

        async def rcycle() -> None:
            await rlock.acquire()
            await rlock.release()

        t, ping = await apaired_us(rcycle, raw.ping, n)
        rows.append(("redis-py asyncio Lock", t, t / (2 * ping)))
        await raw.aclose()
        return rows

    return asyncio.run(main())


# ---------------------------------------------------------------- handoff
def handoff(
    make: Callable[[], tuple[Callable[[], object], Callable[[], object]]], rounds: int
) -> float:
    """Median ms from a holder's release call to the waiter (another thread) holding."""
    holder_acquire, holder_release = make()
    waiter_acquire, waiter_release = make()
    gaps = []
    for _ in range(rounds):
        holder_acquire()
        ready = threading.Event()
        stamp: list[float] = []

        def wait(ready: threading.Event = ready, stamp: list[float] = stamp) -> None:
            ready.set()
            waiter_acquire()
            stamp.append(time.perf_counter())
            waiter_release()

        t = threading.Thread(target=wait)
        t.start()
        ready.wait()
        time.sleep(0.02)  # let the waiter start waiting: we measure the wake-up, not the start
        released = time.perf_counter()
        holder_release()
        t.join(30)
        gaps.append(stamp[0] - released)
    return statistics.median(gaps) * 1e3


def handoffs(url: str, rounds: int) -> list[tuple[str, float]]:
    rows = []
    clients: list[tenure.Client] = []

    def tenure_pair() -> tuple[Callable[[], object], Callable[[], object]]:
        client = tenure.Client(url)
        clients.append(client)
        lock = client.lock("bench:h")
        return lock.acquire, lock.release

    rows.append(("tenure Lock", handoff(tenure_pair, rounds)))

    def fair_pair() -> tuple[Callable[[], object], Callable[[], object]]:
        client = tenure.Client(url)
        clients.append(client)
        lock = client.fair_lock("bench:h-fair")
        return lock.acquire, lock.release

    rows.append(("tenure FairLock", handoff(fair_pair, rounds)))

    def semaphore_pair() -> tuple[Callable[[], object], Callable[[], object]]:
        client = tenure.Client(url)
        clients.append(client)
        sem = client.semaphore("bench:h-sem")
        sem.try_set_permits(1)
        return sem.acquire, sem.release

    rows.append(("tenure Semaphore (1 permit)", handoff(semaphore_pair, rounds)))

    def redispy_pair() -> tuple[Callable[[], object], Callable[[], object]]:
        lock = redis.Redis.from_url(url).lock("bench:h-redis-py", timeout=30)
        return lock.acquire, lock.release

    rows.append(("redis-py Lock (polls every 0.1 s)", handoff(redispy_pair, max(5, rounds // 5))))
    with contextlib.suppress(ImportError):
        import redis_lock

        def prl_pair() -> tuple[Callable[[], object], Callable[[], object]]:
            lock = redis_lock.Lock(redis.Redis.from_url(url), "bench:h-prl", expire=30)
            return lock.acquire, lock.release

        rows.append(("python-redis-lock (BLPOP)", handoff(prl_pair, rounds)))
    for client in clients:
        client.close()
    return rows


def crash_handoff(url: str, rounds: int) -> float:
    """Median ms between a holder's lease end (never released) and the waiter holding."""
    with tenure.Client(url) as a, tenure.Client(url) as b:
        gaps = []
        for i in range(rounds):
            name = f"bench:crash{i}"
            lease = 0.2
            a.lock(name).acquire(lease_time=lease)
            expires = time.perf_counter() + lease
            b.lock(name).acquire()
            gaps.append(time.perf_counter() - expires)
            b.lock(name).release()
    return statistics.median(gaps) * 1e3


# ---------------------------------------------------------------- contention
def _contend(
    url: str, name: str, start: float, seconds: float, out: object, kind: str = "lock"
) -> None:
    """Acquire and release in a loop; puts (count, grants). For ``fair`` each grant is
    (sequence number, owner, queue head seen inside the section): the next grant must go to
    that head for the order to be FIFO."""
    grants: list[tuple[int, str, str | None]] = []
    with tenure.Client(url) as client:
        raw = redis.Redis.from_url(url, decode_responses=True)
        if kind == "fair":
            lock: tenure.Lock = client.fair_lock(name)
        elif kind == "read":
            lock = client.read_write_lock(name).read_lock()
        else:
            lock = client.lock(name)
        queue = keys.fair_queue_key(name)
        while time.time() < start:
            time.sleep(0.001)
        count = 0
        while time.time() < start + seconds:
            with lock:
                count += 1
                if kind == "fair":
                    seq, head = raw.pipeline().incr(name + ":seq").lindex(queue, 0).execute()
                    grants.append((seq, client._runner.owner(), head))
        raw.close()
    out.put((count, grants))  # type: ignore[attr-defined]


def contention(
    url: str, procs: int, seconds: float, kind: str = "lock"
) -> tuple[float, float, list[int], float | None]:
    """(acquisitions/s, Jain's index, per-process counts, FIFO share or None) with ``procs``
    processes taking a ``kind`` lock (lock, fair, read)."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    start = time.time() + 1.5  # all processes spawned and connected before the clock starts
    name = f"bench:{kind}{procs}:{time.time_ns()}"
    ps = [
        ctx.Process(target=_contend, args=(url, name, start, seconds, out, kind))
        for _ in range(procs)
    ]
    for p in ps:
        p.start()
    results = [out.get(timeout=60) for _ in ps]
    for p in ps:
        p.join()
    counts = [c for c, _ in results]
    jain = sum(counts) ** 2 / (len(counts) * sum(c * c for c in counts)) if any(counts) else 0
    fifo = None
    if kind == "fair":
        grants = sorted(g for _, gs in results for g in gs)
        checks = [(a[2], b[1]) for a, b in itertools.pairwise(grants) if a[2] is not None]
        fifo = sum(head == owner for head, owner in checks) / len(checks) if checks else 1.0
    return sum(counts) / seconds, jain, counts, fifo


# ---------------------------------------------------------------- footprint
def idle_waiters(url: str, waiters: int, seconds: float, kind: str = "lock") -> tuple[int, int]:
    """(commands the server processed while ``waiters`` threads waited, pub/sub connections).

    ``kind`` "semaphore": they wait for a permit of a semaphore with none.
    """
    raw = redis.Redis.from_url(url)
    with tenure.Client(url) as holder, tenure.Client(url) as client:
        holder.lock("bench:idle").acquire()

        def wait_then_release() -> None:
            if kind == "semaphore":
                sem = client.semaphore("bench:idle-sem")
                if sem.acquire(timeout=30):
                    sem.release()
                return
            lock = client.lock("bench:idle")
            if lock.acquire(timeout=30):
                lock.release()

        threads = [threading.Thread(target=wait_then_release, daemon=True) for _ in range(waiters)]
        for t in threads:
            t.start()
        time.sleep(1.0)  # everyone subscribed and asleep
        before = int(raw.info("stats")["total_commands_processed"])
        time.sleep(seconds)
        after = int(raw.info("stats")["total_commands_processed"])
        pubsub_conns = sum(1 for c in raw.client_list() if int(c.get("sub", 0)) > 0)
        holder.lock("bench:idle").force_release()
        holder.semaphore("bench:idle-sem").release(waiters)
        for t in threads:
            t.join(30)
    raw.close()
    return after - before - 1, pubsub_conns  # minus the second INFO itself


def memory_per_lock(url: str) -> int:
    raw = redis.Redis.from_url(url)
    with tenure.Client(url) as client:
        lock = client.lock("bench:memory")
        lock.acquire()
        usage = int(raw.memory_usage("bench:memory") or 0)
        lock.release()
    raw.close()
    return usage


# ---------------------------------------------------------------- report
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", help="server to use; default: an embedded Valkey")
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    args = parser.parse_args()
    n = 300 if args.quick else 2000
    rounds = 20 if args.quick else 100
    seconds = 1.0 if args.quick else 3.0
    server = embedded_server() if args.url is None else contextlib.nullcontext(args.url)
    with server as url:
        console.print(
            f"[bold]tenure bench[/] on {url} (python {sys.version.split()[0]}, "
            f"redis-py {redis.__version__})"
        )
        table = Table(title="uncontended acquire + release (median)")
        table.add_column("library")
        table.add_column("µs", justify="right")
        table.add_column("x 2·PING (interleaved)", justify="right")
        for name, us, ratio in uncontended(url, n) + uncontended_async(url, n):
            table.add_row(name, f"{us:.0f}", f"{ratio:.2f}")
        console.print(table)
        console.print("target: tenure acquire+release ≤ 1.2 x 2·PING")

        table = Table(title="handoff latency (median)")
        table.add_column("case")
        table.add_column("ms", justify="right")
        for name, ms in handoffs(url, rounds):
            table.add_row(f"after release: {name}", f"{ms:.3f}")
        table.add_row(
            "after holder crash (lease expiry): tenure Lock",
            f"{crash_handoff(url, max(5, rounds // 5)):.3f}",
        )
        console.print(table)
        console.print("targets: ≤ 0.3 ms after release, ≤ 5 ms after lease expiry")

        table = Table(title=f"contended throughput, {seconds:.0f} s per row (tenure Lock)")
        for col in ("processes", "acquisitions/s", "Jain's index", "per process"):
            table.add_column(col, justify="right")
        for procs in (2, 4, 8):
            rate, jain, counts, _ = contention(url, procs, seconds)
            table.add_row(str(procs), f"{rate:,.0f}", f"{jain:.3f}", " ".join(map(str, counts)))
        console.print(table)

        table = Table(title=f"FairLock, {seconds:.0f} s per row")
        for col in ("processes", "acquisitions/s", "FIFO order", "Jain's index", "per process"):
            table.add_column(col, justify="right")
        for procs in (2, 4, 8):
            rate, jain, counts, fifo = contention(url, procs, seconds, "fair")
            table.add_row(
                str(procs),
                f"{rate:,.0f}",
                f"{100 * (fifo or 0):.1f} %",
                f"{jain:.3f}",
                " ".join(map(str, counts)),
            )
        console.print(table)
        console.print("targets: FIFO order 100 %, Jain ≥ 0.99")

        table = Table(title=f"ReadWriteLock read side vs Lock, 8 processes, {seconds:.0f} s")
        table.add_column("lock")
        table.add_column("acquisitions/s", justify="right")
        for kind, label in (("read", "ReadWriteLock read_lock (shared)"), ("lock", "Lock")):
            rate, _, _, _ = contention(url, 8, seconds, kind)
            table.add_row(label, f"{rate:,.0f}")
        console.print(table)

        commands, conns = idle_waiters(url, 50, 3.0)
        table = Table(title="footprint")
        table.add_column("measure")
        table.add_column("value", justify="right")
        table.add_row("commands sent by 50 idle waiters in 3 s", str(commands))
        sem_commands, _ = idle_waiters(url, 50, 3.0, "semaphore")
        table.add_row("commands sent by 50 idle Semaphore waiters in 3 s", str(sem_commands))
        table.add_row("pub/sub connections for 50 waiting threads of one client", str(conns))
        table.add_row("server memory per held lock (MEMORY USAGE)", f"{memory_per_lock(url)} B")
        console.print(table)


if __name__ == "__main__":
    main()
