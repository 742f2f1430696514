"""Messages delivered per unlock on a ReadWriteLock's write side: P processes, one client
each, take the write lock in a loop (the critical section a GET + SET of a counter, as in
``bench/contention.py``, whose runner this probe reuses).

Besides the write-only rows, a mixed row: each process takes the read lock one time in four
(the readers of several clients must all be woken, so those unlocks go to the channel).
Lost updates (two writers at once) are counted as in the contended rows.

Run: ``python -m bench.rw_wake_probe [--procs 8] [--seconds 5] [--runs 3] [--no-redis]``
(the embedded Valkey, and Debian's redis-server when present).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
from collections.abc import Callable

import tenure
from bench import peers
from bench.common import server_label, started
from bench.contention import contend
from tenure.embedded import embedded_server

WRITE = "tenure RW write"
MIXED = "tenure RW 1 read in 4"


def rw_write(url: str, name: str) -> peers.Participant:
    client = tenure.Client(url)
    lock = client.read_write_lock(name).write_lock()
    return lock.acquire, lock.release, client.close


def rw_mixed(url: str, name: str) -> peers.Participant:
    """Every fourth acquisition takes the read lock (the counter's SET then races other
    readers: the lost updates of this row count those, not two writers)."""
    client = tenure.Client(url)
    rw = client.read_write_lock(name)
    sides = [rw.write_lock(), rw.write_lock(), rw.write_lock(), rw.read_lock()]
    turn = [0]
    held: list[Callable[[], object]] = []

    def acquire() -> bool:
        side = sides[turn[0] % len(sides)]
        turn[0] += 1
        got = side.acquire()
        held.append(side.release)
        return got

    def release() -> None:
        held.pop()()

    return acquire, release, client.close


# Registered at import: the spawned workers import this module as their main module.
peers.FACTORIES[WRITE] = rw_write
peers.FACTORIES[MIXED] = rw_mixed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--procs", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-redis", action="store_true", help="skip Debian's redis-server")
    parser.add_argument("--no-mixed", action="store_true", help="write-only rows")
    args = parser.parse_args()
    subjects = [WRITE] if args.no_mixed else [WRITE, MIXED]
    with contextlib.ExitStack() as stack:
        urls = [stack.enter_context(embedded_server())]
        binary = shutil.which("redis-server")
        if binary and not args.no_redis:
            urls.append(stack.enter_context(started(binary)))
        print("server | subject | P | msgs/unlock | acq/s | cmds/acq | Jain | p99 ms | lost")
        for url in urls:
            label = server_label(url)
            for subject in subjects:
                for _ in range(args.runs):
                    r = contend(url, subject, args.procs, args.seconds)
                    if r is None:
                        continue
                    print(
                        f"{label} | {subject} | {args.procs} | {r['messages_per_acq']:.2f} | "
                        f"{r['acq_per_s']:.0f} | {r['cmds_per_acq']:.1f} | {r['jain']:.3f} | "
                        f"{r['wait_p99_ms']:.1f} | {r['lost_updates']}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
