"""Uncontended Lock acquire + release: this tree (A) against another tree (B), in lockstep.

    python bench/uncontended_ab.py /path/to/other/tree [--runs 3] [--rounds 300] [--url URL]

B is another checkout of tenure (a worktree of an older commit: ``git worktree add
/tmp/wt 14107aa``). One child process per tree imports tenure from that tree's ``src``;
both run against one server (an embedded Valkey unless ``--url``). The machine is shared
(two cores whose load drifts within seconds), so the children take turns block by block:
each round, in an order shuffled afresh, every (tree, subject) runs one block of
``--block`` acquire + release pairs while the other child waits, so load hits both trees
alike. Subjects: the sync Lock (watchdog) beside sherlock's RedisLock, and the AsyncLock
beside redis.asyncio's Lock (the peers of docs/benchmarks.md's uncontended rows).

A run is ``--rounds`` rounds; for each run it prints the median pair time of each
(tree, subject), the ratios to the peers and A ÷ B. Then the deterministic figures, each
tree alone on the server: server commands and server microseconds per pair (INFO
commandstats after CONFIG RESETSTAT, the least of five: the EVALSHA and the commands its
script ran, both counted, as the server counts them), and Python function calls per pair
(cProfile), sync and asyncio. Lower is better everywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import pstats
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
DASH = "\u2013"  # the ranges' en dash, as docs/benchmarks.md writes them
SUBJECTS = ("tenure sync", "sherlock", "tenure async", "redis.asyncio")


def commandstats(raw: Any) -> tuple[int, float]:
    """Calls and microseconds of every command but INFO and CONFIG since the last reset."""
    calls, usec = 0, 0.0
    for name, stats in raw.info("commandstats").items():
        if name in ("cmdstat_info", "cmdstat_config"):
            continue
        calls += int(stats["calls"])
        usec += float(stats["usec"])
    return calls, usec


async def child(url: str) -> None:
    """Serve the parent: a line ``<subject> <n>`` runs n pairs and answers their times (s)
    as JSON; ``counts`` answers the deterministic figures; ``quit`` ends."""
    import redis
    import redis.asyncio
    import sherlock

    import tenure

    raw = redis.Redis.from_url(url)
    client = tenure.Client(url)
    lock = client.lock("ab:sync")
    sher = sherlock.RedisLock("ab:sherlock", client=redis.Redis.from_url(url), expire=30)
    aclient = tenure.AsyncClient(url)
    alock = aclient.lock("ab:async")
    peer = redis.asyncio.Redis.from_url(url)
    rlock = peer.lock("ab:redis-asyncio", timeout=30)

    def tenure_sync() -> None:
        assert lock.acquire()
        lock.release()

    def sherlock_sync() -> None:
        assert sher.acquire()
        sher.release()

    async def tenure_async() -> None:
        assert await alock.acquire()
        await alock.release()

    async def redis_async() -> None:
        assert await rlock.acquire()
        await rlock.release()

    cases: dict[str, tuple[Callable[[], None] | None, Callable[[], Awaitable[None]] | None]] = {
        "tenure sync": (tenure_sync, None),
        "sherlock": (sherlock_sync, None),
        "tenure async": (None, tenure_async),
        "redis.asyncio": (None, redis_async),
    }

    async def pairs(subject: str, n: int) -> list[float]:
        sync, coro = cases[subject]
        clock, took = time.perf_counter, []
        for _ in range(n):
            start = clock()
            if sync is not None:
                sync()
            else:
                assert coro is not None
                await coro()
            took.append(clock() - start)
        return took

    async def counts() -> dict[str, float]:
        out: dict[str, float] = {}
        n = 1000
        for subject in ("tenure sync", "tenure async"):
            key = subject.split()[1]
            best: tuple[int, float] | None = None
            for _ in range(5):  # the least of five: the server shares the machine too
                raw.config_resetstat()
                await pairs(subject, n)
                stats_now = commandstats(raw)
                best = stats_now if best is None or stats_now[1] < best[1] else best
            assert best is not None
            out[f"commands {key}"], out[f"server us {key}"] = best[0] / n, best[1] / n
            profile = cProfile.Profile()
            profile.enable()
            await pairs(subject, n)
            profile.disable()
            stats: Any = pstats.Stats(profile)
            out[f"py calls {key}"] = stats.total_calls / n
        return out

    try:
        for line in sys.stdin:
            word = line.split()
            if word[0] == "quit":
                break
            answer: Any = (
                await counts()
                if word[0] == "counts"
                else await pairs(line.rsplit(" ", 1)[0], int(word[-1]))
            )
            print(json.dumps(answer), flush=True)
    finally:
        await aclient.close()
        await peer.aclose()
        client.close()
        raw.close()


@contextlib.contextmanager
def server(url: str | None) -> Iterator[str]:
    if url is not None:
        yield url
        return
    from tenure.embedded import embedded_server

    with embedded_server() as started:
        yield started


class Child:
    def __init__(self, tree: Path, url: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--child", str(tree), "--url", url],
            env=dict(os.environ, PYTHONPATH=str(tree / "src")),
            cwd="/",
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self, line: str) -> Any:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            raise RuntimeError(f"the child of {line!r} ended")
        return json.loads(answer)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("quit\n")
        self.process.stdin.close()
        self.process.wait(30)


def span(values: list[float], fmt: str) -> str:
    one, two = f"{min(values):{fmt}}", f"{max(values):{fmt}}"
    return one if one == two else f"{one}{DASH}{two}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("other", nargs="?", help="the other tree (B)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--block", type=int, default=10)
    parser.add_argument("--url", default=None)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child is not None:
        import tenure

        expected = Path(options.child).resolve() / "src"
        assert Path(tenure.__file__).resolve().is_relative_to(expected), tenure.__file__
        asyncio.run(child(options.url))
        return
    trees = {"A": HERE, "B": Path(options.other).resolve()}
    order = random.Random(23)
    per_run: list[dict[tuple[str, str], float]] = []
    with server(options.url) as url:
        children = {tag: Child(tree, url) for tag, tree in trees.items()}
        try:
            turns = [(tag, subject) for tag in trees for subject in SUBJECTS]
            for _ in range(20):  # warm-up
                for tag, subject in turns:
                    children[tag].ask(f"{subject} {options.block}")
            for run in range(options.runs):
                samples: dict[tuple[str, str], list[float]] = {turn: [] for turn in turns}
                for _ in range(options.rounds):
                    order.shuffle(turns)
                    for tag, subject in turns:
                        samples[tag, subject] += children[tag].ask(f"{subject} {options.block}")
                medians = {turn: statistics.median(s) * 1e6 for turn, s in samples.items()}
                per_run.append(medians)
                print(
                    f"run {run + 1}: "
                    + "  ".join(
                        f"{tag} sync {medians[tag, 'tenure sync']:.1f} µs "
                        f"(÷ sherlock {medians[tag, 'tenure sync'] / medians[tag, 'sherlock']:.3f})"
                        f" async {medians[tag, 'tenure async']:.1f} µs (÷ redis.asyncio "
                        f"{medians[tag, 'tenure async'] / medians[tag, 'redis.asyncio']:.3f})"
                        for tag in trees
                    ),
                    flush=True,
                )
            counts = {tag: children[tag].ask("counts") for tag in trees}
        finally:
            for each in children.values():
                each.close()
    print()
    print(f"A = {trees['A']}\nB = {trees['B']}")
    print(f"| figure ({options.runs} runs, blocks interleaved) | A | B | A ÷ B |")
    print("|---|---:|---:|---:|")
    rows: list[tuple[str, Callable[[dict[tuple[str, str], float], str], float], str]] = [
        ("sync Lock ÷ sherlock", lambda m, t: m[t, "tenure sync"] / m[t, "sherlock"], ".3f"),
        (
            "AsyncLock ÷ redis.asyncio Lock",
            lambda m, t: m[t, "tenure async"] / m[t, "redis.asyncio"],
            ".3f",
        ),
        ("sync pair, µs (median)", lambda m, t: m[t, "tenure sync"], ".1f"),
        ("asyncio pair, µs (median)", lambda m, t: m[t, "tenure async"], ".1f"),
    ]
    for label, f, fmt in rows:
        a = [f(m, "A") for m in per_run]
        b = [f(m, "B") for m in per_run]
        ratio = [x / y for x, y in zip(a, b, strict=True)]
        print(f"| {label} | {span(a, fmt)} | {span(b, fmt)} | {span(ratio, '.3f')} |")
    for key, label, fmt in (
        ("commands sync", "server commands per pair", ".1f"),
        ("server us sync", "server µs per pair, sync", ".2f"),
        ("server us async", "server µs per pair, asyncio", ".2f"),
        ("py calls sync", "Python calls per pair, sync", ".1f"),
        ("py calls async", "Python calls per pair, asyncio", ".1f"),
    ):
        a, b = counts["A"][key], counts["B"][key]
        print(f"| {label} | {a:{fmt}} | {b:{fmt}} | {a / b:.3f} |")


if __name__ == "__main__":
    main()
