"""Path 4: one lock, P processes (each its own client) acquiring and releasing in a loop."""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import redis

from bench import peers
from bench.common import Results, calls_delta, command_calls, jain


def _worker(
    subject: str, url: str, name: str, seconds: float, ready: Any, go: Any, start: Any, out: Any
) -> None:
    acquire, release, close = peers.FACTORIES[subject](url, name)
    try:
        acquire()  # scripts loaded, connections made: not part of the measured run
        release()
        ready.put(True)
        go.wait()
        end = start.value + seconds
        count = 0
        while time.time() < end:
            acquire()
            count += 1
            release()
        out.put(count)
    finally:
        close()


def contend(url: str, subject: str, procs: int, seconds: float) -> dict[str, Any]:
    """Run ``procs`` processes of ``subject`` for ``seconds``: acquisitions/s, Jain's index,
    per-process counts, and server commands (INFO commandstats, script-inner calls included)
    per acquisition over the run."""
    ctx = multiprocessing.get_context("spawn")
    ready, out, go, start = ctx.Queue(), ctx.Queue(), ctx.Event(), ctx.Value("d", 0.0)
    name = f"bench:c:{subject}:{procs}:{time.time_ns()}"
    ps = [
        ctx.Process(
            target=_worker, args=(subject, url, name, seconds, ready, go, start, out), daemon=True
        )
        for _ in range(procs)
    ]
    for proc in ps:
        proc.start()
    for _ in ps:
        ready.get(timeout=120)
    raw = redis.Redis.from_url(url)
    before = command_calls(raw)
    start.value = time.time()
    go.set()
    time.sleep(seconds)
    after = command_calls(raw)
    counts = [out.get(timeout=300) for _ in ps]
    for proc in ps:
        proc.join(30)
    raw.close()
    delta = calls_delta(before, after)
    total = sum(counts)
    return {
        "acq_per_s": total / seconds,
        "jain": jain(counts),
        "cmds_per_acq": sum(delta.values()) / total if total else float("inf"),
        "counts": counts,
        "commands": delta,
    }


def contention(results: Results, url: str, seconds: float, procs: tuple[int, ...]) -> None:
    names = list(peers.TENURE) + peers.available("python-redis-lock", "redis-py Lock", "sherlock")
    names += list(peers.FLOORS)
    for p in procs:
        for name in names:
            r = contend(url, name, p, seconds)
            role = "tenure" if name in peers.TENURE else "floor" if name in peers.FLOORS else "peer"
            extra = {"procs": p, "counts": r["counts"], "commands": r["commands"]}
            for metric in ("acq_per_s", "jain", "cmds_per_acq"):
                results.add("contended", name, role, metric, r[metric], **extra)
