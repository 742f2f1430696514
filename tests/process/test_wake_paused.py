"""A Lock's unlock that woke one client alone (the wake queue, docs/wire.md) reaches the
next client when the one woken is paused: the lock does not stay free until the old
holder's lease end while another client's waiter sleeps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import tenure
from support.twins import wait_until
from tenure import keys

SRC = str(Path(tenure.__file__).resolve().parents[1])

CHILD = r"""
import sys, tenure
client = tenure.Client(sys.argv[1])
lock = client.lock("paused-first")
print("waiting", flush=True)
if lock.acquire(timeout=60):
    lock.release()
client.close()
"""


def test_an_unlock_woken_into_a_paused_client_reaches_the_next(server, make_client, r) -> None:
    lease = 10.0
    holder = make_client().lock("paused-first")
    assert holder.acquire(lease_time=lease)
    queue = keys.lock_wake_queue("paused-first")
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, server.url],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "waiting"
            assert wait_until(lambda: r.zcard(queue) == 1, 10)  # the child is first
            other = make_client().lock("paused-first")
            got: dict[str, float] = {}

            def wait_for_the_lock() -> None:
                if other.acquire(timeout=lease + 5):
                    got["at"] = time.monotonic()
                    other.release()

            waiter = threading.Thread(target=wait_for_the_lock)
            waiter.start()
            assert wait_until(lambda: r.zcard(queue) == 2, 10)  # second in the queue
            os.kill(child.pid, signal.SIGSTOP)  # the first can no longer act on a wake-up
            released = time.monotonic()
            holder.release()
            waiter.join(lease + 10)
            assert "at" in got, "the other client's waiter never got the lock"
            # Within the back-up's grace and a few round trips, not at the lease end (10 s).
            assert got["at"] - released < 1.0, got["at"] - released
        finally:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
