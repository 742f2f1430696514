"""Contended FairLock: what the hop from a pub/sub reader thread to the waiting thread costs.

    python bench/hop_probe.py [procs] [--rounds N] [--seconds S] [--url redis://...]

Runs ``procs`` processes on one lock for each variant (in a shuffled order per round) and
prints acquisitions/s and the client CPU (all processes, user + system) per acquisition:

- ``tenure FairLock``;
- ``raw fair handoff floor`` (bench/peers.py): tenure's fair scripts on bare redis-py, the
  waiter reading its own pub/sub socket;
- ``fair floor + reader thread``: the same floor, but a reader thread reads the socket and
  sets an event that the waiting thread sleeps on, as tenure's sync listener did before its
  waiters read the socket themselves.

The third minus the second is the price of the hop; tenure's distance to the floor is
compared with it in docs/benchmarks.md ("4 contended FairLock").
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from bench import peers
from bench.common import embedded

HOP = "fair floor + reader thread"


def fair_floor_with_reader_thread(url: str, name: str) -> peers.Participant:
    """``peers.raw_fair_handoff`` with the wake-up passed on by a reader thread."""
    return peers.raw_fair_handoff(url, name, reader_thread=True)


def _worker(subject: str, url: str, name: str, seconds: float, ready: Any, go: Any, out: Any):
    factory = fair_floor_with_reader_thread if subject == HOP else peers.FACTORIES[subject]
    acquire, release, close = factory(url, name)
    acquire()  # connections made, scripts loaded: not measured
    release()
    ready.put(True)
    go.wait()
    end = time.time() + seconds
    cpu, count = time.process_time(), 0
    while time.time() < end:
        acquire()
        count += 1
        release()
    out.put((count, time.process_time() - cpu))
    close()


def run(url: str, subject: str, procs: int, seconds: float) -> tuple[float, float]:
    """(acquisitions/s, client CPU µs per acquisition) of ``procs`` processes."""
    ctx = multiprocessing.get_context("spawn")
    ready, out, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    name = f"bench:hop:{time.time_ns()}"
    ps = [
        ctx.Process(target=_worker, args=(subject, url, name, seconds, ready, go, out))
        for _ in range(procs)
    ]
    for p in ps:
        p.start()
    for _ in ps:
        ready.get(timeout=60)
    go.set()
    results = [out.get(timeout=60 + seconds) for _ in ps]
    for p in ps:
        p.join(30)
    count = sum(n for n, _ in results)
    return count / seconds, sum(c for _, c in results) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("procs", nargs="?", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--url")
    args = parser.parse_args()
    subjects = ["tenure FairLock", "raw fair handoff floor", HOP]
    server = embedded(1) if args.url is None else contextlib.nullcontext((args.url,))
    shuffle = random.Random(14)
    with server as (url,):
        for n in range(args.rounds):
            for subject in shuffle.sample(subjects, len(subjects)):
                rate, cpu = run(url, subject, args.procs, args.seconds)
                print(f"round {n + 1} P={args.procs} {subject:28s} {rate:7,.0f} acq/s  "
                      f"client CPU {cpu:6.1f} µs/acq")  # fmt: skip


if __name__ == "__main__":
    main()
