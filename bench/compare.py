"""Two runs of bench/run.py side by side (``--json`` files): the headline figures as ranges.

    python bench/compare.py BEFORE.json AFTER.json [--labels before,after]

Prints a markdown table: each figure's range over the runs of each file. Ratios to a peer are
taken within one run, so they compare across files even when the machine's load differed;
absolute times compare only under the same load.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Measurement, Results
from bench.report import PRL, span

Figure = tuple[str, str, Callable[[Results], float | None]]


def _ratio(res: Results, path: str, a: str, b: str, metric: str, **match: Any) -> float | None:
    x, y = res.get(path, a, metric, **match), res.get(path, b, metric, **match)
    return x / y if x is not None and y else None


def figures() -> list[Figure]:
    out: list[Figure] = [
        ("uncontended sync Lock, µs", ",.0f", lambda r: r.get("uncontended", "tenure Lock", "us")),
        (
            "uncontended sync Lock ÷ sherlock",
            ".2f",
            lambda r: _ratio(r, "uncontended", "tenure Lock", "sherlock", "us"),
        ),
        (
            "uncontended AsyncLock, µs",
            ",.0f",
            lambda r: r.get("uncontended-async", "tenure AsyncLock", "us"),
        ),
        (
            "uncontended AsyncLock ÷ redis.asyncio Lock",
            ".2f",
            lambda r: _ratio(
                r, "uncontended-async", "tenure AsyncLock", "redis.asyncio Lock", "us"
            ),
        ),
        ("handoff Lock, median ms", ".3f", lambda r: r.get("handoff", "tenure Lock", "median_ms")),
        (
            "handoff Lock, median ÷ " + PRL,
            ".2f",
            lambda r: _ratio(r, "handoff", "tenure Lock", PRL, "median_ms"),
        ),
        (
            "handoff Lock, p99 ÷ " + PRL,
            ".2f",
            lambda r: _ratio(r, "handoff", "tenure Lock", PRL, "p99_ms"),
        ),
    ]
    for path, where in (("contended", " on Valkey"), ("contended-redis", " on Redis")):
        for subject in ("tenure Lock", "tenure FairLock"):
            short = subject.removeprefix("tenure ") + where

            def get(
                metric: str, n: int, s: str = subject, path: str = path
            ) -> Callable[[Results], Any]:
                return lambda r: r.get(path, s, metric, procs=n)

            def vs(n: int, s: str = subject, path: str = path) -> Callable[[Results], Any]:
                return lambda r: _ratio(r, path, s, PRL, "acq_per_s", procs=n)

            out += [(f"contended {short}, acq/s ÷ {PRL}, P={n}", ".2f", vs(n)) for n in (2, 4, 8)]
            out += [
                ("  Jain, P=8", ".2f", get("jain", 8)),
                ("  wait p99 ms, P=8", ".1f", get("wait_p99_ms", 8)),
                ("  worst wait ms, P=8", ",.0f", get("wait_max_ms", 8)),
                ("  commands per acquisition, P=8", ".1f", get("cmds_per_acq", 8)),
                ("  pub/sub messages per unlock, P=8", ".2f", get("messages_per_acq", 8)),
            ]
    out += [
        (
            "semaphore drain, 100 waiters, ms",
            ",.0f",
            lambda r: r.get("semaphore-drain", "tenure Semaphore", "all_ms"),
        ),
        (
            "  ÷ redis-semaphore",
            ".2f",
            lambda r: _ratio(r, "semaphore-drain", "tenure Semaphore", "redis-semaphore", "all_ms"),
        ),
        (
            "  commands per acquisition",
            ".1f",
            lambda r: r.get("semaphore-drain", "tenure Semaphore", "cmds_per_acq"),
        ),
        (
            "PermitExpirableSemaphore drain, ms",
            ",.0f",
            lambda r: r.get("semaphore-drain", "tenure PermitExpirableSemaphore", "all_ms"),
        ),
        (
            "latch, 100 waiters, ms to the last",
            ".1f",
            lambda r: r.get("latch", "tenure CountDownLatch", "last_ms"),
        ),
        (
            "RedLock acquire ÷ 1-master Lock",
            ".2f",
            lambda r: _ratio(
                r, "redlock", "tenure RedLock (5 masters)", "tenure Lock (1 master)", "acquire_ms"
            ),
        ),
        (
            "asyncio 1,000 tasks: AsyncLock commands per acquisition",
            ".1f",
            lambda r: r.get("async-tasks", "tenure AsyncLock", "cmds_per_acq"),
        ),
        (
            "500 idle waiters: drain s",
            ".2f",
            lambda r: r.get("idle-waiters", "tenure Lock", "drain_s"),
        ),
    ]
    return out


SHORT_SKIPS = (
    "P=2",
    "P=4",
    "wait p99",
    "worst wait",
    "commands per acquisition, P",
    "median ms",
    "µs",
)
"""Rows --short leaves out: the rates at P=2 and P=4, the tails and costs, absolute times."""


def load(path: Path) -> list[Results]:
    data = json.loads(path.read_text())
    return [Results([Measurement(**m) for m in run]) for run in data["runs"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--labels", default="before,after")
    parser.add_argument("--short", action="store_true", help="the headline rows only")
    args = parser.parse_args()
    a, b = load(args.before), load(args.after)
    la, lb = args.labels.split(",")
    print(f"| figure | {la} | {lb} |")
    print("|---|---:|---:|")
    for label, spec, fn in figures():
        if args.short and any(skip in label for skip in SHORT_SKIPS):
            continue
        x, y = span([fn(r) for r in a], spec), span([fn(r) for r in b], spec)
        if x or y:
            print(f"| {label.replace('  ', '&nbsp;&nbsp;')} | {x or 'n/a'} | {y or 'n/a'} |")


if __name__ == "__main__":
    main()
