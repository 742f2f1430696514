"""``tenure demo``: many processes and threads (or tasks) contend for one lock.

Each critical section does a deliberately non-atomic GET -> +1 -> SET of a counter and
records its entry and exit times on the host's monotonic clock (shared by all processes).
Afterwards the counter must equal the number of critical sections (no lost update) and no
two sections may overlap in time.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.queues import Queue
from queue import Empty
from typing import Any

import redis
import redis.asyncio

import tenure

Span = tuple[int, int, int]
"""(worker id, entry ns, exit ns) of one critical section."""

KINDS = ("lock", "fair", "rw")

RW_WRITER_EVERY = 4
"""With ``--kind rw`` every 4th worker (thread or task) writes; the others read."""


def is_writer(kind: str, wid: int) -> bool:
    """True if worker ``wid`` updates the counter (always, except for the readers of rw)."""
    return kind != "rw" or wid % RW_WRITER_EVERY == 0


def _sync_worker(
    url: str, name: str, kind: str, worker: int, threads: int, rounds: int, done: Any
) -> list[Span]:
    spans: list[Span] = []
    with tenure.Client(url) as client:
        raw = redis.Redis.from_url(url)

        def work(wid: int) -> None:
            lock = _make_lock(client, kind, name, is_writer(kind, wid))
            for _ in range(rounds):
                with lock:
                    enter = time.monotonic_ns()
                    value = int(raw.get(name + ":counter") or 0)
                    if is_writer(kind, wid):
                        raw.set(name + ":counter", value + 1)
                    spans.append((wid, enter, time.monotonic_ns()))
                with done.get_lock():
                    done.value += 1

        pool = [threading.Thread(target=work, args=(worker * threads + t,)) for t in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        raw.close()
    return spans


def _make_lock(client: tenure.Client, kind: str, name: str, writer: bool) -> tenure.Lock:
    if kind == "lock":
        return client.lock(name)
    if kind == "fair":
        return client.fair_lock(name)
    if kind == "rw":
        rw = client.read_write_lock(name)
        return rw.write_lock() if writer else rw.read_lock()
    raise ValueError(f"unknown kind {kind!r}")


def _make_async_lock(
    client: tenure.AsyncClient, kind: str, name: str, writer: bool
) -> tenure.AsyncLock:
    if kind == "lock":
        return client.lock(name)
    if kind == "fair":
        return client.fair_lock(name)
    if kind == "rw":
        rw = client.read_write_lock(name)
        return rw.write_lock() if writer else rw.read_lock()
    raise ValueError(f"unknown kind {kind!r}")


def _async_worker(
    url: str, name: str, kind: str, worker: int, tasks: int, rounds: int, done: Any
) -> list[Span]:
    async def main() -> list[Span]:
        spans: list[Span] = []
        async with tenure.AsyncClient(url) as client:
            raw = redis.asyncio.Redis.from_url(url)

            async def work(wid: int) -> None:
                lock = _make_async_lock(client, kind, name, is_writer(kind, wid))
                for _ in range(rounds):
                    async with lock:
                        enter = time.monotonic_ns()
                        value = int(await raw.get(name + ":counter") or 0)
                        if is_writer(kind, wid):
                            await raw.set(name + ":counter", value + 1)
                        spans.append((wid, enter, time.monotonic_ns()))
                    with done.get_lock():
                        done.value += 1

            await asyncio.gather(*(work(worker * tasks + t) for t in range(tasks)))
            await raw.aclose()
        return spans

    return asyncio.run(main())


def _entry(worker: Callable[..., list[Span]], results: Any, args: tuple[Any, ...]) -> None:
    try:
        results.put(worker(*args))
    except BaseException as error:
        results.put(f"{type(error).__name__}: {error}")
        raise


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
    url: str,
    *,
    kind: str = "lock",
    processes: int = 4,
    threads: int = 2,
    rounds: int = 200,
    use_asyncio: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Report:
    """Run the contention workload against ``url`` and return what it measured."""
    name = f"tenure-demo:{time.time_ns()}"
    ctx = multiprocessing.get_context("spawn")
    done = ctx.Value("i", 0)
    total = processes * threads * rounds
    worker = _async_worker if use_asyncio else _sync_worker
    results: Queue[list[Span] | str] = ctx.Queue()
    procs = [
        ctx.Process(
            target=_entry,
            args=(worker, results, (url, name, kind, w, threads, rounds, done)),
            daemon=True,
        )
        for w in range(processes)
    ]
    for proc in procs:
        proc.start()
    spans: list[Span] = []
    received = 0
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
            spans += outcome
            received += 1
    finally:
        for proc in procs:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
    if progress is not None:
        progress(done.value, total)
    raw = redis.Redis.from_url(url)
    counter = int(raw.get(name + ":counter") or 0)
    raw.delete(name + ":counter")
    raw.close()
    if kind == "rw":
        writes = sum(
            rounds for w in range(processes * threads) if is_writer(kind, w)
        )
        return analyse_rw(spans, total, writes, counter)
    return analyse(spans, total, counter)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of ``values``; NaN when empty."""
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[max(0, min(98, round(q) - 1))]
