"""``tenure demo``: many processes and threads (or tasks) contend for one lock.

Each critical section does a deliberately non-atomic GET -> +1 -> SET of a counter and
records its entry and exit times on the host's monotonic clock (shared by all processes).
Afterwards the counter must equal the number of critical sections (no lost update) and no
two sections may overlap in time.

Kinds (`KINDS`; each builds its lock in `_make_lock()` / `_make_async_lock()`):
``lock`` (tenure.Lock), ``red`` (RedLock over one lock per server, `SERVERS` servers;
the counter lives on the first), ``fenced`` (FencedLock; the section reads the counter with
[`tenure.fenced_read()`][tenure.fencing.fenced_read] and writes it with
[`tenure.fenced_write()`][tenure.fencing.fenced_write] under the lock's
token, and counts the writes refused as stale), ``semaphore`` (tenure.Semaphore with
`PERMITS` permits: up to that many workers inside at once; the section INCRs the counter,
and the report shows the most inside at once), ``latch`` (a barrier per round: every worker
counts a fresh CountDownLatch down and waits on it; the report shows wake-up latency after
the last count-down and wakes before it, which must be 0).

Beside a counter kind (`COUNTER_KINDS`), ``tenure demo`` runs the same sections with no
lock at all (`NO_LOCK`: updates get lost) and shows a holder killed and replaced
(`takeover()`). Worker processes ignore Ctrl-C (the parent stops them) and, on Linux,
die with their parent.
"""

from __future__ import annotations

import asyncio
import ctypes
import multiprocessing
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AsyncExitStack, ExitStack, contextmanager, nullcontext, suppress
from dataclasses import dataclass
from multiprocessing.queues import Queue
from queue import Empty
from typing import Any

import redis
import redis.asyncio
import redis.cluster

import tenure
from tenure import keys
from tenure.embedded import embedded_cluster as embedded_cluster

Span = tuple[int, int, int]
"""(worker id, entry ns, exit ns) of one critical section."""

KINDS = ("lock", "fair", "rw", "red", "fenced", "semaphore", "latch")

NO_LOCK = "none"
"""The baseline `run()` also accepts: the same sections with no lock at all, to show the
updates a lock keeps from being lost."""

COUNTER_KINDS = ("lock", "fair", "rw", "red", "fenced")
"""The kinds whose sections update one counter: the demo shows the baseline beside them and
a holder killed and replaced."""

PERMITS = 3
"""Permits of the semaphore ``--kind semaphore`` runs on."""

PERMIT_HOLD = 0.002
"""Seconds a ``semaphore`` section keeps its permit after its INCR: long enough that the
permits are seen shared (up to `PERMITS` inside at once) on a loaded machine, where a
bare INCR ends before the next worker is let in."""

RW_WRITER_EVERY = 4
"""With ``--kind rw`` every 4th worker (thread or task) writes; the others read."""


def is_writer(kind: str, wid: int) -> bool:
    """True if worker ``wid`` updates the counter (always, except for the readers of rw)."""
    return kind != "rw" or wid % RW_WRITER_EVERY == 0


SERVERS = {"red": 5}
"""Independent servers a kind needs (1 when not listed)."""

Outcome = tuple[list[Span], int]
"""What a worker process returns: its spans and how many fenced writes were refused."""


def servers_needed(kind: str) -> int:
    """How many independent servers ``kind`` runs on."""
    return SERVERS.get(kind, 1)


# The kind dispatch: one branch per kind, building the lock from the worker's clients (one
# client per URL; every kind but ``red`` has a single one).


def _make_lock(
    clients: Sequence[Any],  # all tenure.Client or all tenure.AsyncClient
    kind: str,
    name: str,
    writer: bool = True,
) -> Any:
    # Sync and asyncio clients have the same factory names, so one dispatch serves both.
    if kind == NO_LOCK:
        return nullcontext()
    if kind == "lock":
        return clients[0].lock(name)
    if kind == "fair":
        return clients[0].fair_lock(name)
    if kind == "rw":
        rw = clients[0].read_write_lock(name)
        return rw.write_lock() if writer else rw.read_lock()
    if kind == "fenced":
        return clients[0].fenced_lock(name)
    if kind == "red":
        return clients[0].red_lock(*(c.lock(name) for c in clients))
    raise ValueError(f"unknown kind {kind!r}")


def _fenced_increment(raw: redis.Redis, key: str, token: int) -> bool:
    """The fenced section: read, +1, ``fenced_write``; False if the write was refused."""
    current = tenure.fenced_read(raw, key)
    value = int(current[1]) if current is not None else 0
    return tenure.fenced_write(raw, key, token, str(value + 1))


def _read_counter(raw: redis.Redis, kind: str, key: str) -> int:
    if kind == "fenced":
        current = tenure.fenced_read(raw, key)
        return int(current[1]) if current is not None else 0
    return int(raw.get(key) or 0)


def _in_threads(work: Callable[[int], None], worker: int, threads: int) -> None:
    """Run ``work(wid)`` in ``threads`` threads of process ``worker`` (wids unique across
    processes) and wait for them all."""
    pool = [threading.Thread(target=work, args=(worker * threads + t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()


def _sync_worker(
    urls: tuple[str, ...],
    name: str,
    kind: str,
    worker: int,
    threads: int,
    rounds: int,
    done: Any,
) -> Outcome:
    spans: list[Span] = []
    refused = 0
    key = name + ":counter"
    with ExitStack() as stack:
        clients = [stack.enter_context(tenure.Client(url)) for url in urls]
        raw = stack.enter_context(redis.Redis.from_url(urls[0]))
        shared = _make_lock(clients, kind, name)
        if isinstance(shared, tenure.RedLock):
            stack.callback(shared.close)
        fenced = isinstance(shared, tenure.FencedLock)

        def work(wid: int) -> None:
            nonlocal refused
            writer = is_writer(kind, wid)
            lock = _make_lock(clients, kind, name, writer) if kind == "rw" else shared
            for _ in range(rounds):
                with lock:
                    enter = time.monotonic_ns()
                    if fenced:
                        if not _fenced_increment(raw, key, lock.token):
                            refused += 1
                    else:
                        value = int(raw.get(key) or 0)
                        if writer:
                            raw.set(key, value + 1)
                    spans.append((wid, enter, time.monotonic_ns()))
                with done.get_lock():
                    done.value += 1

        _in_threads(work, worker, threads)
    return spans, refused


def _async_worker(
    urls: tuple[str, ...],
    name: str,
    kind: str,
    worker: int,
    tasks: int,
    rounds: int,
    done: Any,
) -> Outcome:
    async def main() -> Outcome:
        spans: list[Span] = []
        refused = 0
        key = name + ":counter"
        async with AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(tenure.AsyncClient(url)) for url in urls]
            raw = await stack.enter_async_context(redis.asyncio.Redis.from_url(urls[0]))
            # fenced_write is sync-only: the fenced section runs it on a sync client in a
            # worker thread (asyncio.to_thread) so the event loop keeps serving the others.
            sync_raw = stack.enter_context(redis.Redis.from_url(urls[0]))
            shared = _make_lock(clients, kind, name)
            fenced = isinstance(shared, tenure.AsyncFencedLock)

            async def work(wid: int) -> None:
                nonlocal refused
                writer = is_writer(kind, wid)
                lock = _make_lock(clients, kind, name, writer) if kind == "rw" else shared
                for _ in range(rounds):
                    async with lock:
                        enter = time.monotonic_ns()
                        if fenced:
                            stored = await asyncio.to_thread(
                                _fenced_increment, sync_raw, key, lock.token
                            )
                            if not stored:
                                refused += 1
                        else:
                            value = int(await raw.get(key) or 0)
                            if writer:
                                await raw.set(key, value + 1)
                        spans.append((wid, enter, time.monotonic_ns()))
                    with done.get_lock():
                        done.value += 1

            await asyncio.gather(*(work(worker * tasks + t) for t in range(tasks)))
        return spans, refused

    return asyncio.run(main())


def _sync_primitive_worker(
    urls: tuple[str, ...],
    name: str,
    kind: str,
    worker: int,
    threads: int,
    rounds: int,
    done: Any,
) -> Outcome:
    """``semaphore`` and ``latch`` kinds, threads."""
    spans: list[Span] = []
    with tenure.Client(urls[0]) as client, redis.Redis.from_url(urls[0]) as raw:
        sem = client.semaphore(name)

        def work(wid: int) -> None:
            for r in range(rounds):
                if kind == "semaphore":
                    with sem:
                        enter = time.monotonic_ns()
                        raw.incr(name + ":counter")
                        time.sleep(PERMIT_HOLD)
                        spans.append((wid, enter, time.monotonic_ns()))
                else:
                    latch = client.count_down_latch(f"{name}:{r}")
                    raw.incr(name + ":counter")
                    counted = time.monotonic_ns()
                    latch.count_down()
                    latch.wait()
                    spans.append((wid, counted, time.monotonic_ns()))
                with done.get_lock():
                    done.value += 1

        _in_threads(work, worker, threads)
    return spans, 0


def _async_primitive_worker(
    urls: tuple[str, ...],
    name: str,
    kind: str,
    worker: int,
    tasks: int,
    rounds: int,
    done: Any,
) -> Outcome:
    """``semaphore`` and ``latch`` kinds, asyncio tasks."""

    async def main() -> Outcome:
        spans: list[Span] = []
        async with (
            tenure.AsyncClient(urls[0]) as client,
            redis.asyncio.Redis.from_url(urls[0]) as raw,
        ):
            sem = client.semaphore(name)

            async def work(wid: int) -> None:
                for r in range(rounds):
                    if kind == "semaphore":
                        async with sem:
                            enter = time.monotonic_ns()
                            await raw.incr(name + ":counter")
                            await asyncio.sleep(PERMIT_HOLD)
                            spans.append((wid, enter, time.monotonic_ns()))
                    else:
                        latch = client.count_down_latch(f"{name}:{r}")
                        await raw.incr(name + ":counter")
                        counted = time.monotonic_ns()
                        await latch.count_down()
                        await latch.wait()
                        spans.append((wid, counted, time.monotonic_ns()))
                    with done.get_lock():
                        done.value += 1

            await asyncio.gather(*(work(worker * tasks + t) for t in range(tasks)))
        return spans, 0

    return asyncio.run(main())


def _entry(worker: Callable[..., Outcome], results: Any, args: tuple[Any, ...]) -> None:
    """A worker process: its outcome, or its error as one line, goes to ``results``."""
    _worker_signals()
    try:
        results.put(worker(*args))
    except BaseException as error:  # reported by the parent as one line, no traceback
        results.put(f"{type(error).__name__}: {error}")
        sys.exit(1)


def _worker_signals() -> None:
    """Ctrl-C reaches the whole process group: the parent alone handles it (and stops the
    workers). On Linux a worker also dies with its parent, however the parent ended."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform == "linux":
        with suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Start worker processes with SIGINT ignored (inherited through exec, and Python keeps
    an ignored SIGINT ignored), so a Ctrl-C during their start-up prints no traceback."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


PR_SET_PDEATHSIG = 1
"""prctl(2) option: the signal a process gets when its parent dies (Linux)."""


def reachable(urls: Sequence[str]) -> None:
    """PING each server once (5 s timeouts) before any worker starts.

    Raises:
        redis.ConnectionError, redis.TimeoutError: a server did not answer.
    """
    for url in urls:
        with redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5) as raw:
            raw.ping()


def _stop(procs: Sequence[Any], failed: bool) -> None:
    """Wait for the workers (5 s each) after a run; kill them at once after a failure or an
    interrupt."""
    for proc in procs:
        if not failed:
            proc.join(5)
        if proc.is_alive():
            proc.kill()
        proc.join(5)


@dataclass
class Report:
    """What a demo run measured."""

    sections: int
    expected: int
    counter: int
    seconds: float
    overlaps: int
    handoff_ms: list[float]
    per_worker: dict[int, int]
    counter_expected: int | None = None
    """rw only: the write sections, each of which adds one to the counter."""
    reader_overlaps: int | None = None
    """rw only: read sections that overlapped another read section (sharing, wanted > 0);
    ``overlaps`` then counts sections that overlapped a write section (must be 0)."""
    stale_writes: int | None = None
    """Fenced writes refused as stale (``fenced`` kind only; None for the others)."""
    permits: int | None = None
    """semaphore only: the permits; ``overlaps`` then counts entries beyond them."""
    max_inside: int | None = None
    """semaphore only: the most workers inside at once (at most ``permits``)."""
    latch: bool = False
    """latch only: ``overlaps`` counts wakes before a round's last count-down and
    ``handoff_ms`` the wake-up latency after it."""

    @property
    def lost_updates(self) -> int:
        expected = self.expected if self.counter_expected is None else self.counter_expected
        return expected - self.counter

    @property
    def ok(self) -> bool:
        return self.lost_updates == 0 and self.overlaps == 0 and self.sections == self.expected


def analyse_rw(spans: Sequence[Span], expected: int, writes: int, counter: int) -> Report:
    """``analyse`` for readers and writers: writes must overlap nothing, reads may share."""
    report = analyse(spans, expected, counter)
    report.counter_expected = writes
    write_spans = [s for s in spans if is_writer("rw", s[0])]
    reads = [s for s in spans if not is_writer("rw", s[0])]
    report.overlaps = sum(
        1
        for w in write_spans
        for other in spans
        if other is not w and other[1] < w[2] and w[1] < other[2]
    )
    ordered = sorted(reads, key=lambda s: s[1])
    shared = 0
    latest_exit = 0
    for _, enter, leave in ordered:
        shared += enter < latest_exit
        latest_exit = max(latest_exit, leave)
    report.reader_overlaps = shared
    return report


def analyse_semaphore(spans: Sequence[Span], expected: int, counter: int, permits: int) -> Report:
    """``analyse`` for a semaphore: up to ``permits`` sections may overlap; ``overlaps``
    counts the entries that found ``permits`` or more already inside."""
    report = analyse(spans, expected, counter)
    events = sorted([(enter, 1) for _, enter, _ in spans] + [(leave, -1) for _, _, leave in spans])
    level = most = beyond = 0
    for _, step in events:
        if step > 0 and level >= permits:
            beyond += 1
        level += step
        most = max(most, level)
    report.overlaps, report.permits, report.max_inside = beyond, permits, most
    return report


def analyse_latch(spans: Sequence[Span], expected: int, counter: int) -> Report:
    """``analyse`` for latch rounds: span i of a worker is (counted down, woke) of round i."""
    report = analyse(spans, expected, counter)
    rounds: dict[int, list[tuple[int, int]]] = {}
    seen: dict[int, int] = {}
    for wid, counted, woke in spans:
        r = seen[wid] = seen.get(wid, -1) + 1
        rounds.setdefault(r, []).append((counted, woke))
    early = 0
    latency: list[float] = []
    for entries in rounds.values():
        last = max(counted for counted, _ in entries)
        early += sum(1 for _, woke in entries if woke < last)
        latency += [(woke - last) / 1e6 for _, woke in entries if woke >= last]
    report.overlaps, report.handoff_ms, report.latch = early, latency, True
    return report


def relabel(report: Report, rows: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The report rows (measure, value) as the kind names them (semaphore, latch)."""
    names = dict.fromkeys(m for m, _ in rows)
    if report.permits is not None:
        names["overlapping critical sections"] = "entries beyond the permits"
        rows = [*rows, ("most inside at once", f"{report.max_inside} (permits {report.permits})")]
    if report.latch:
        names["overlapping critical sections"] = "woke before the count reached 0"
        names["handoff latency p50"] = "wake-up after last count-down p50"
        names["handoff latency p99"] = "wake-up after last count-down p99"
        names["acquisitions"] = "count-downs"
    return [(names.get(m) or m, v) for m, v in rows]


def analyse(spans: Sequence[Span], expected: int, counter: int) -> Report:
    """Overlaps, handoff gaps and per-worker counts of the recorded critical sections."""
    ordered = sorted(spans, key=lambda s: s[1])
    overlaps = 0
    latest_exit = 0
    handoff: list[float] = []
    for _, enter, leave in ordered:
        if enter < latest_exit:
            overlaps += 1
        elif latest_exit:
            handoff.append((enter - latest_exit) / 1e6)
        latest_exit = max(latest_exit, leave)
    per_worker: dict[int, int] = {}
    for wid, _, _ in ordered:
        per_worker[wid] = per_worker.get(wid, 0) + 1
    seconds = (ordered[-1][2] - ordered[0][1]) / 1e9 if ordered else 0.0
    return Report(len(spans), expected, counter, seconds, overlaps, handoff, per_worker)


def run(
    url: str | Sequence[str],
    *,
    kind: str = "lock",
    processes: int = 4,
    threads: int = 2,
    rounds: int = 200,
    use_asyncio: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Report:
    """Run the contention workload against ``url`` and return what it measured.

    ``url`` is one URL, or for ``red`` a sequence of URLs of independent servers (the counter
    lives on the first).
    """
    if kind not in KINDS and kind != NO_LOCK:
        raise ValueError(f"unknown kind {kind!r}")
    urls = (url,) if isinstance(url, str) else tuple(url)
    if not urls:
        raise ValueError("url must name at least one server")
    if kind != "red" and len(urls) != 1:
        raise ValueError(f"kind {kind!r} runs on one server, got {len(urls)} URLs")
    reachable(urls)
    name = f"tenure-demo:{time.time_ns()}"
    ctx = multiprocessing.get_context("spawn")
    done = ctx.Value("i", 0)
    total = processes * threads * rounds
    worker = _async_worker if use_asyncio else _sync_worker
    if kind in ("semaphore", "latch"):
        worker = _async_primitive_worker if use_asyncio else _sync_primitive_worker
        _prepare(urls[0], kind, name, processes * threads, rounds)
    results: Queue[Outcome | str] = ctx.Queue()
    procs = [
        ctx.Process(
            target=_entry,
            args=(worker, results, (urls, name, kind, w, threads, rounds, done)),
            daemon=True,
        )
        for w in range(processes)
    ]
    with _sigint_ignored():
        for proc in procs:
            proc.start()
    spans: list[Span] = []
    refused = 0
    received = 0
    failed = True
    try:
        while received < processes:
            if progress is not None:
                progress(done.value, total)
            try:
                outcome = results.get(timeout=0.1)
            except Empty:
                if any(p.exitcode not in (None, 0) for p in procs):
                    raise RuntimeError("a demo worker process died") from None
                continue
            if isinstance(outcome, str):
                raise RuntimeError(f"a demo worker failed: {outcome}")
            spans += outcome[0]
            refused += outcome[1]
            received += 1
        failed = False
    finally:
        _stop(procs, failed)
    if progress is not None:
        progress(done.value, total)
    with redis.Redis.from_url(urls[0]) as raw:
        counter = _read_counter(raw, kind, name + ":counter")
        # The wake queue too: it lives 10 minutes after its last use (docs/wire.md).
        raw.delete(name + ":counter", keys.token_key(name), name, keys.lock_wake_queue(name))
    if kind == "semaphore":
        return analyse_semaphore(spans, total, counter, PERMITS)
    if kind == "latch":
        return analyse_latch(spans, total, counter)
    if kind == "rw":
        writes = sum(rounds for w in range(processes * threads) if is_writer(kind, w))
        return analyse_rw(spans, total, writes, counter)
    report = analyse(spans, total, counter)
    if kind == "fenced":
        report.stale_writes = refused
    return report


# ------------------------------------------------------------------ a holder killed
@dataclass
class Takeover:
    """A holder killed (SIGKILL) while it held the lock, and the waiter that took over."""

    pid: int
    """The killed holder's process id."""
    lease: float
    """The holder's lease (its client's ``watchdog_timeout``), seconds."""
    blocked: float
    """Seconds the waiter waited while the holder lived."""
    kept: bool
    """The waiter did not get the lock while the holder lived (its watchdog renewed it)."""
    took_over: float | None
    """Seconds from the kill to the waiter's grant; None if it never came (or no kill)."""

    @property
    def ok(self) -> bool:
        """The lock stayed held while the holder lived, and was taken within a lease (plus
        2 s of slack for a loaded machine) after the kill."""
        return self.kept and self.took_over is not None and self.took_over <= self.lease + 2.0


def _hold(urls: tuple[str, ...], kind: str, name: str, lease: float, held: Any) -> None:
    """The holder process: take the lock (watchdog lease ``lease``), say so, wait to be
    killed (a plain sleep: a process killed while it waits on a shared Event or Condition
    would block the next ``set()`` for ever)."""
    _worker_signals()
    with ExitStack() as stack:
        clients = [stack.enter_context(tenure.Client(u, watchdog_timeout=lease)) for u in urls]
        lock = _make_lock(clients, kind, name)
        lock.acquire()
        held.set()
        time.sleep(600)


def takeover(url: str | Sequence[str], *, kind: str = "lock", lease: float = 2.0) -> Takeover:
    """Start a holder process with a ``lease``-second watchdog lease, show that a waiter cannot
    take the lock for one whole lease (the watchdog renews it), SIGKILL the holder, and time
    how long the waiter then takes to get the lock (until the lease ran out: nobody renews
    it). ``url`` as for `run()`; ``kind`` one of `COUNTER_KINDS`.

    Raises:
        ValueError: an unknown kind, or one without a holder to kill.
        RuntimeError: the holder process did not take the lock within 30 s.
    """
    if kind not in COUNTER_KINDS:
        raise ValueError(f"takeover needs a lock kind ({', '.join(COUNTER_KINDS)}), not {kind!r}")
    urls = (url,) if isinstance(url, str) else tuple(url)
    name = f"tenure-demo:{time.time_ns()}:takeover"
    ctx = multiprocessing.get_context("spawn")
    held = ctx.Event()
    holder = ctx.Process(target=_hold, args=(urls, kind, name, lease, held), daemon=True)
    with _sigint_ignored():
        holder.start()
    try:
        if not held.wait(30):
            raise RuntimeError("the holder process did not take the lock within 30 s")
        with ExitStack() as stack:
            clients = [stack.enter_context(tenure.Client(u)) for u in urls]
            lock = _make_lock(clients, kind, name)
            if isinstance(lock, tenure.RedLock):
                stack.callback(lock.close)
            started = time.monotonic()
            if lock.acquire(timeout=lease):  # the holder's hold was not kept alive
                lock.release()
                return Takeover(holder.pid or 0, lease, time.monotonic() - started, False, None)
            blocked = time.monotonic() - started
            holder.kill()
            killed = time.monotonic()
            granted = lock.acquire(timeout=lease + 10)
            took = time.monotonic() - killed if granted else None
            if granted:
                lock.release()
            return Takeover(holder.pid or 0, lease, blocked, True, took)
    finally:
        _stop([holder], failed=True)
        with redis.Redis.from_url(urls[0]) as raw:
            raw.delete(name, keys.token_key(name), keys.lock_wake_queue(name))


def _prepare(url: str, kind: str, name: str, workers: int, rounds: int) -> None:
    """Set the semaphore's permits, or one latch per round counting every worker."""
    with tenure.Client(url) as client:
        if kind == "semaphore":
            client.semaphore(name).set_permits(PERMITS)
            return
        for r in range(rounds):
            client.count_down_latch(f"{name}:{r}").try_set_count(workers)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of ``values``; NaN when empty."""
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[max(0, min(98, round(q) - 1))]


# ------------------------------------------------------------------ cluster demo
# embedded_cluster lives in tenure.embedded (every embedded server starts there); it is
# re-exported here for code that imported it from tenure.demo.


@dataclass
class ShardReport:
    """The demo's outcome on one shard (the master that owns its names' slots)."""

    node: str
    names: list[str]
    report: Report


def cluster_names(
    url: str, per_shard: int = 2, prefix: str = "tenure-demo"
) -> dict[str, list[str]]:
    """``per_shard`` lock names for each master of the cluster at ``url``: node -> names."""
    raw = redis.cluster.RedisCluster.from_url(url)
    try:
        masters = {n.name for n in raw.get_primaries()}
        chosen: dict[str, list[str]] = {m: [] for m in masters}
        stamp = time.time_ns()
        i = 0
        while any(len(v) < per_shard for v in chosen.values()):
            name = f"{prefix}:{stamp}:{i}"
            node = raw.nodes_manager.get_node_from_slot(raw.keyslot(name)).name
            if len(chosen[node]) < per_shard:
                chosen[node].append(name)
            i += 1
        return chosen
    finally:
        raw.close()


def _cluster_worker(
    url: str, names: list[str], worker: int, threads: int, rounds: int, done: Any
) -> Outcome:
    spans: list[Span] = []
    with tenure.Client(url) as client, redis.cluster.RedisCluster.from_url(url) as raw:

        def work(wid: int) -> None:
            name = names[wid % len(names)]
            key = "{" + name + "}:counter"
            lock = client.lock(name)
            for _ in range(rounds):
                with lock:
                    enter = time.monotonic_ns()
                    raw.set(key, int(raw.get(key) or 0) + 1)
                    spans.append((wid, enter, time.monotonic_ns()))
                with done.get_lock():
                    done.value += 1

        _in_threads(work, worker, threads)
    return spans, 0


def run_cluster(
    url: str,
    *,
    processes: int = 4,
    threads: int = 6,
    rounds: int = 50,
    per_shard: int = 2,
    progress: Callable[[int, int], None] | None = None,
) -> list[ShardReport]:
    """The contention workload on a cluster: ``per_shard`` lock names on every master, worker
    thread ``w`` of all ``processes * threads`` works on name ``w mod len(names)``; returns
    one report per shard (each name's sections checked on their own, then summed).
    """
    by_node = cluster_names(url, per_shard)
    names = [n for node in sorted(by_node) for n in by_node[node]]
    ctx = multiprocessing.get_context("spawn")
    done = ctx.Value("i", 0)
    total = processes * threads * rounds
    results: Queue[Outcome | str] = ctx.Queue()
    procs = [
        ctx.Process(
            target=_entry,
            args=(_cluster_worker, results, (url, names, w, threads, rounds, done)),
            daemon=True,
        )
        for w in range(processes)
    ]
    with _sigint_ignored():
        for proc in procs:
            proc.start()
    spans: list[Span] = []
    failed = True
    try:
        for _ in range(processes):
            while True:
                if progress is not None:
                    progress(done.value, total)
                try:
                    outcome = results.get(timeout=0.1)
                    break
                except Empty:
                    if any(p.exitcode not in (None, 0) for p in procs):
                        raise RuntimeError("a demo worker process died") from None
            if isinstance(outcome, str):
                raise RuntimeError(f"a demo worker failed: {outcome}")
            spans += outcome[0]
        failed = False
    finally:
        _stop(procs, failed)
    if progress is not None:
        progress(done.value, total)
    reports = []
    with redis.cluster.RedisCluster.from_url(url) as raw:
        for node in sorted(by_node):
            parts = []
            for name in by_node[node]:
                index = names.index(name)
                mine = [s for s in spans if s[0] % len(names) == index]
                key = "{" + name + "}:counter"
                counter = int(raw.get(key) or 0)
                raw.delete(key)
                workers = sum(1 for w in range(processes * threads) if w % len(names) == index)
                parts.append(analyse(mine, workers * rounds, counter))
            reports.append(ShardReport(node, by_node[node], _sum(parts)))
    return reports


def _sum(parts: Sequence[Report]) -> Report:
    merged = Report(0, 0, 0, 0.0, 0, [], {})
    for part in parts:
        merged.sections += part.sections
        merged.expected += part.expected
        merged.counter += part.counter
        merged.seconds = max(merged.seconds, part.seconds)
        merged.overlaps += part.overlaps
        merged.handoff_ms += part.handoff_ms
        merged.per_worker.update(part.per_worker)
    return merged


def cluster_main(url: str | None, processes: int, threads: int, rounds: int) -> bool:
    """``tenure demo --cluster``: the contention workload on a cluster (an embedded 3-master
    Valkey cluster unless ``url`` names a node of one), reported per shard. True if every
    shard kept mutual exclusion."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    with ExitStack() as stack:
        target = url or stack.enter_context(embedded_cluster())
        where = target if url else f"embedded 3-master Valkey cluster at {target}"
        console.print(
            f"[bold]tenure demo --cluster[/]: {processes} processes x {threads} threads x "
            f"{rounds} rounds on {where}"
        )
        reports = run_cluster(target, processes=processes, threads=threads, rounds=rounds)
    table = Table(title="tenure demo --cluster (per shard)")
    for column in ("shard (master)", "locks", "acquisitions", "lost updates", "overlaps"):
        table.add_column(column, justify="right")
    table.add_column("handoff p50 / p99", justify="right")
    for shard in reports:
        r = shard.report
        table.add_row(
            shard.node,
            str(len(shard.names)),
            f"{r.sections} / {r.expected}",
            str(r.lost_updates),
            str(r.overlaps),
            f"{percentile(r.handoff_ms, 50):.2f} / {percentile(r.handoff_ms, 99):.2f} ms",
        )
    console.print(table)
    ok = all(s.report.ok for s in reports)
    if ok:
        console.print("[bold green]OK[/]: no lost update, no overlap on any shard")
    else:
        console.print("[bold red]FAILED[/]: mutual exclusion was violated")
    return ok
