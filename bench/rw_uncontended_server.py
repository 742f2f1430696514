"""Server time of an uncontended ReadWriteLock pair: this tree (A) against another (B).

    python bench/rw_uncontended_server.py /path/to/other/tree [--runs 7] [--pairs 2000]

One child process per tree imports tenure from that tree's ``src``; both use one server
(an embedded Valkey unless ``--url``) and take turns, run by run, so load hits both alike.
For each run and each side (write, read) a child makes ``--pairs`` acquire + release pairs
of the sync ReadWriteLock, between a CONFIG RESETSTAT and an INFO commandstats: the server
microseconds per pair of the EVALSHA calls (the commands their scripts ran included, as the
server counts them) and the commands per pair. Prints min / median per tree and side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any


def child(url: str) -> None:
    import redis

    import tenure

    raw = redis.Redis.from_url(url)
    client = tenure.Client(url)
    rw = client.read_write_lock("rw-ab")
    for line in sys.stdin:
        side, n = line.split()
        lock = rw.write_lock() if side == "write" else rw.read_lock()
        assert lock.acquire()
        lock.release()  # scripts loaded, connection warm
        raw.config_resetstat()
        for _ in range(int(n)):
            assert lock.acquire()
            lock.release()
        stats = raw.info("commandstats")
        usec = float(stats["cmdstat_evalsha"]["usec"])
        calls = sum(
            int(v["calls"])
            for k, v in stats.items()
            if k not in ("cmdstat_info", "cmdstat_config", "cmdstat_evalsha")
        )
        print(json.dumps([usec / int(n), calls / int(n)]), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("other", nargs="?")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--url")
    parser.add_argument("--child", action="store_true")
    args = parser.parse_args()
    if args.child:
        child(args.url)
        return
    from tenure.embedded import embedded_server

    trees = {"A": Path(__file__).resolve().parents[1], "B": Path(args.other).resolve()}
    with embedded_server() as url:
        kids = {
            name: subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--child", "--url", url],
                env=dict(os.environ, PYTHONPATH=str(tree / "src")),
                cwd="/",
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for name, tree in trees.items()
        }
        results: dict[tuple[str, str], list[Any]] = {}
        for run in range(args.runs):
            order = ["A", "B"] if run % 2 == 0 else ["B", "A"]
            for side in ("write", "read"):
                for name in order:
                    kid = kids[name]
                    assert kid.stdin is not None
                    assert kid.stdout is not None
                    kid.stdin.write(f"{side} {args.pairs}\n")
                    kid.stdin.flush()
                    results.setdefault((name, side), []).append(json.loads(kid.stdout.readline()))
        for kid in kids.values():
            assert kid.stdin is not None
            kid.stdin.close()
            kid.wait()
    for (name, side), rows in sorted(results.items()):
        usec = [r[0] for r in rows]
        print(
            f"{name} {side:5}: {min(usec):6.2f} / {statistics.median(usec):6.2f} us per pair"
            f" (min / median of {len(rows)}), {rows[0][1]:.1f} commands in scripts"
        )


if __name__ == "__main__":
    main()
