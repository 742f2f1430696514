"""FencedLock: a holder paused (SIGSTOP) past its lease is refused at the resource."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import tenure

SRC = str(Path(tenure.__file__).resolve().parents[1])

CHILD = r"""
import sys, tenure, redis
c = tenure.Client(sys.argv[1])
lock = c.fenced_lock("job")
token = lock.acquire_token(lease_time=float(sys.argv[2]))
print(token, flush=True)
sys.stdin.readline()          # the test stops us (SIGSTOP) before we get here
ok = tenure.fenced_write(redis.Redis.from_url(sys.argv[1]), "resource", token, b"old")
print("stored" if ok else "refused", flush=True)
"""


def test_paused_holder_write_refused_new_holder_accepted(server, client, r):
    lease = 1.0
    # leaving the with block closes the child's pipes and reaps it
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, server.url, str(lease)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdin is not None
            old_token = int(child.stdout.readline())
            os.kill(child.pid, signal.SIGSTOP)  # the holder pauses longer than its lease
            child.stdin.write("go\n")
            child.stdin.flush()
            lock = client.fenced_lock("job")
            new_token = lock.acquire_token(timeout=10)  # granted once the paused lease ran out
            assert new_token is not None
            assert new_token > old_token
            assert tenure.fenced_write(r, "resource", new_token, b"new")
            os.kill(child.pid, signal.SIGCONT)
            assert child.stdout.readline().strip() == "refused"
            assert tenure.fenced_read(r, "resource") == (new_token, b"new")
            lock.release()
        finally:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
