"""tenure's benchmark: every path beside the peer libraries and the raw floors, over N runs.

    pip install -e '.[bench]'
    python bench/run.py [--runs N] [--quick] [--only PATH[,PATH]] [--json FILE]
                        [--markdown FILE] [--plots DIR] [--url URL]

One embedded Valkey (``tenure.embedded``; or ``--url``) serves every path; the RedLock path adds
five embedded servers. Every path runs ``--runs`` times (default 3); each ratio is taken within
one run (the same load on both sides), and each table cell shows its range over the runs.
Prints the tables and the goals; writes them as markdown (``--markdown``), every measurement
(``--json``) and plots (``--plots``, default docs/img; ``''`` for none). Peers that are not
installed are skipped, and so is a subject whose factory fails (an older tenure without the
API it needs). Paths: uncontended, async, handoff, contended, semaphore, latch, tasks,
waiters, redlock, footprint.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.metadata
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``bench`` importable (spawned workers too)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis
from rich.console import Console

import tenure
from bench import contention, drain, fanout, herd, latency, report
from bench.common import (
    MACHINE_NOTE,
    Measurement,
    Results,
    embedded,
    redis_server,
    server_label,
)

PATHS = (
    "uncontended",
    "async",
    "handoff",
    "contended",
    "semaphore",
    "latch",
    "tasks",
    "waiters",
    "redlock",
    "footprint",
)

DISTS = (
    "tenure",
    "redis",
    "hiredis",
    "python-redis-lock",
    "sherlock",
    "pottery",
    "redis-semaphore",
)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def one_run(
    url: str, redis_url: str | None, only: tuple[str, ...], quick: bool, console: Console
) -> Results:
    """Every path of ``only`` once; the contended rows also on ``redis_url`` when given."""
    results = Results()
    n = 300 if quick else 2000
    seconds, procs = (1.0, (2,)) if quick else (3.0, (2, 4, 8))
    steps: list[tuple[str, str, Callable[[], None]]] = [
        ("uncontended", "uncontended sync", lambda: latency.uncontended(results, url, n)),
        ("async", "uncontended asyncio", lambda: latency.uncontended_async(results, url, n)),
        ("handoff", "handoff", lambda: latency.handoff(results, url, 20 if quick else 200)),
        (
            "handoff",
            "crash handoff",
            lambda: latency.crash_handoff(results, url, 3 if quick else 10),
        ),
        (
            "contended",
            "contended",
            lambda: contention.contention(results, url, seconds, procs, server=server_label(url)),
        ),
        (
            "contended",
            "contended on redis-server",
            lambda: (
                redis_url is not None
                and contention.contention(
                    results, redis_url, seconds, procs, "contended-redis", server_label(redis_url)
                )
            ),
        ),
        (
            "semaphore",
            "semaphore drain",
            lambda: drain.semaphore_drain(results, url, 100, 1 if quick else 3),
        ),
        ("latch", "latch", lambda: drain.latch(results, url, 100, 1 if quick else 3)),
        (
            "tasks",
            "asyncio tasks",
            lambda: herd.async_tasks(results, url, 100 if quick else 1000, 60 if quick else 300),
        ),
        (
            "waiters",
            "idle waiters",
            lambda: herd.idle_waiters(results, url, 50 if quick else 500, 1.5 if quick else 6.0),
        ),
        ("footprint", "memory per lock", lambda: herd.memory_per_lock(results, url)),
    ]
    for path, label, step in steps:
        if path in only:
            t0 = time.perf_counter()
            step()
            console.print(f"  {label}: {time.perf_counter() - t0:.1f} s", style="dim")
    if "redlock" in only:
        t0 = time.perf_counter()
        with embedded(5) as urls:
            fanout.redlock(results, urls, 200 if quick else 1000)
        console.print(f"  redlock: {time.perf_counter() - t0:.1f} s", style="dim")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--url", help="server for every path but redlock; default: embedded Valkey")
    parser.add_argument("--runs", type=int, default=3, help="runs of every path (default 3)")
    parser.add_argument("--quick", action="store_true", help="small samples: a smoke run")
    parser.add_argument("--only", help=f"comma-separated subset of: {', '.join(PATHS)}")
    parser.add_argument("--json", type=Path, help="write every measurement and the tables here")
    parser.add_argument("--markdown", type=Path, help="write the tables here as markdown")
    parser.add_argument(
        "--images", default="img", help="where --markdown links the plots from (default img)"
    )
    parser.add_argument("--plots", default="docs/img", help="directory for the PNGs ('' = none)")
    parser.add_argument(
        "--from-json", type=Path, help="run nothing: tables and plots of an earlier --json"
    )
    parser.add_argument(
        "--no-redis",
        action="store_true",
        help="skip the contended rows on a Debian redis-server (run when it is installed)",
    )
    args = parser.parse_args(argv)
    only = PATHS if not args.only else tuple(s.strip() for s in args.only.split(","))
    unknown = set(only) - set(PATHS)
    if unknown:
        parser.error(f"--only: unknown path(s) {', '.join(sorted(unknown))}; choose from {PATHS}")
    if args.runs < 1:
        parser.error("--runs: at least 1")
    console = Console(width=160)
    if args.from_json:
        earlier = json.loads(args.from_json.read_text())
        runs = [Results([Measurement(**m) for m in run]) for run in earlier["runs"]]
        return _report(runs, earlier["meta"], args, console)
    meta = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "argv": sys.argv[1:] if argv is None else argv,
        "machine": MACHINE_NOTE,
        "cpu": _cpu(),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "tenure_from": str(Path(tenure.__file__).parent),
        "versions": {d: _version(d) for d in DISTS},
        "quick": args.quick,
        "runs": args.runs,
    }
    runs: list[Results] = []
    server = embedded(1) if args.url is None else contextlib.nullcontext((args.url,))
    beside = redis_server() if args.url is None and not args.no_redis else contextlib.nullcontext()
    with server as (url,), beside as redis_url:
        raw = redis.Redis.from_url(url)
        info = raw.info("server")
        meta["server"] = {
            k: info.get(k) for k in ("server_name", "redis_version", "valkey_version")
        }
        raw.close()
        console.print(f"[bold]tenure bench[/] on {url}, tenure from {meta['tenure_from']}")
        console.print(f"{meta['versions']}", style="dim")
        for i in range(args.runs):
            console.print(f"run {i + 1} of {args.runs}")
            runs.append(one_run(url, redis_url, only, args.quick, console))
    return _report(runs, meta, args, console)


def _report(runs: list[Results], meta: dict[str, Any], args: Any, console: Console) -> int:
    merged = report.merge([report.tables(r) for r in runs])
    goal_rows = report.merge_goals([report.goals(r) for r in runs])
    report.print_tables(merged, goal_rows, console)
    if args.markdown:
        args.markdown.write_text(report.markdown(merged, goal_rows, args.images or None))
    data = {
        "meta": meta,
        "runs": [r.to_json()["measurements"] for r in runs],
        "tables": [asdict(t) for t in merged],
        "goals": goal_rows,
    }
    if args.json:
        args.json.write_text(json.dumps(data, indent=1, default=str))
    if args.plots:
        try:
            from bench import plot

            written = plot.plot(data, Path(args.plots))
        except ImportError as error:  # matplotlib is in the bench extra
            console.print(f"no plots: {error}", style="yellow")
        else:
            for path in written:
                console.print(f"plot: {path}", style="dim")
    return 0


if __name__ == "__main__":
    sys.exit(main())
