"""tenure's benchmark: every path of issue 14 beside the peers and the raw floors, in one run.

    pip install -e '.[bench]'
    python bench/run.py [--quick] [--only PATH[,PATH]] [--json FILE] [--plots DIR] [--url URL]

One embedded Valkey (``tenure.embedded``; or ``--url``) serves every path; the RedLock path adds
five embedded servers. Prints one table: each tenure figure, its floor, the best peer measured in
the same run, the ratios and the issue's target; writes plots (one PNG per path family) into
``--plots`` (default docs/img; ``--plots ''`` for none). Peers that are not installed are
skipped. Paths: uncontended, async, handoff, contended, tasks, waiters, redlock, footprint.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.metadata
import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``bench`` importable (spawned workers too)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis
from rich.console import Console

from bench import contention, fanout, herd, latency, report
from bench.common import MACHINE_NOTE, Results, embedded

PATHS = ("uncontended", "async", "handoff", "contended", "tasks", "waiters", "redlock", "footprint")


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--url", help="server for every path but redlock; default: embedded Valkey")
    parser.add_argument("--quick", action="store_true", help="small samples: a smoke run")
    parser.add_argument("--only", help=f"comma-separated subset of: {', '.join(PATHS)}")
    parser.add_argument("--json", type=Path, help="write the measurements and the table here")
    parser.add_argument("--plots", default="docs/img", help="directory for the PNGs ('' = none)")
    args = parser.parse_args(argv)
    only = PATHS if not args.only else tuple(s.strip() for s in args.only.split(","))
    unknown = set(only) - set(PATHS)
    if unknown:
        parser.error(f"--only: unknown path(s) {', '.join(sorted(unknown))}; choose from {PATHS}")
    q = args.quick
    n = 300 if q else 2000
    console = Console(width=250)
    results = Results()
    results.meta = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "argv": sys.argv[1:] if argv is None else argv,
        "machine": MACHINE_NOTE,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": {
            d: _version(d)
            for d in ("tenure", "redis", "hiredis", "python-redis-lock", "sherlock", "pottery")
        },
        "quick": q,
    }
    server = embedded(1) if args.url is None else contextlib.nullcontext((args.url,))
    with server as (url,):
        raw = redis.Redis.from_url(url)
        results.meta["server"] = {
            k: raw.info("server").get(k) for k in ("server_name", "redis_version", "valkey_version")
        }
        raw.close()
        console.print(f"[bold]tenure bench[/] on {url}: {results.meta['versions']}")
        steps: list[tuple[str, str, Callable[[], None]]] = [
            ("uncontended", "uncontended sync", lambda: latency.uncontended(results, url, n)),
            ("async", "uncontended asyncio", lambda: latency.uncontended_async(results, url, n)),
            ("handoff", "handoff", lambda: latency.handoff(results, url, 15 if q else 100)),
            (
                "handoff",
                "crash handoff",
                lambda: latency.crash_handoff(results, url, 3 if q else 10),
            ),
            (
                "contended",
                "contended",
                lambda: contention.contention(
                    results, url, 1.0 if q else 3.0, (2,) if q else (2, 4, 8)
                ),
            ),
            (
                "tasks",
                "asyncio tasks",
                lambda: herd.async_tasks(results, url, 100 if q else 1000, 60 if q else 300),
            ),
            (
                "waiters",
                "idle waiters",
                lambda: herd.idle_waiters(results, url, 50 if q else 500, 1.5 if q else 6.0),
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
            fanout.redlock(results, urls, 200 if q else 1000)
        console.print(f"  redlock: {time.perf_counter() - t0:.1f} s", style="dim")
    results.rows = report.summarize(results)
    title = f"tenure vs floors and peers, one run ({MACHINE_NOTE})"
    report.print_table(results.rows, title, console)
    data = results.to_json()
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
