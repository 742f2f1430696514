"""``tenure status`` and ``tenure list`` name holders and queued waiters by their client's
name, host and pid, run as the real entry point against the session server."""

from __future__ import annotations

import os
import socket

from support.twins import spawn, wait_until
from tenure import keys

from .runner import tenure_cmd


def test_status_and_list_name_holders_and_waiters(server, r, make_client):
    # named by the renewal pass (every 0.3 s here)
    holder = make_client(name="billing-worker", watchdog_timeout=0.9)
    waiter = make_client(name="report-job", watchdog_timeout=0.9)
    fair = holder.fair_lock("who")
    assert fair.acquire()
    job = spawn(lambda: waiter.fair_lock("who").acquire(timeout=30))
    assert wait_until(lambda: r.llen(keys.fair_queue_key("who")) == 1)
    try:
        registered = [f"tenure:client:{c.client_id}" for c in (holder, waiter)]
        assert wait_until(lambda: all(r.exists(k) for k in registered), timeout=5)
        done = tenure_cmd("status", "who", url=server.url)
        assert done.returncode == 0, done.stderr
        print(done.stdout)
        where = f"({socket.gethostname()} pid {os.getpid()})"
        holder_line = next(line for line in done.stdout.splitlines() if "holder" in line)
        assert "billing-worker" in holder_line
        assert where in holder_line
        queued_line = next(line for line in done.stdout.splitlines() if "queued #1" in line)
        assert "report-job" in queued_line
        assert where in queued_line
        listed = tenure_cmd("list", url=server.url)
        assert listed.returncode == 0, listed.stderr
        print(listed.stdout)
        assert "billing-worker:" in listed.stdout
        assert "tenure:client" not in listed.stdout  # registrations are not names
    finally:
        fair.release()
        job.result()
