"""Waiting on a semaphore or a latch sends no command (MONITOR), and a PermitExpirableSemaphore
waiter sends one attempt per permit expiry, not more."""

from __future__ import annotations

import time

import redis

import tenure
from support.monitor import Monitor
from support.parking import waiting
from support.servers import Server
from support.twins import spawn, wait_until


def test_idle_waiters_send_no_command(server: Server, r: redis.Redis, make_client) -> None:
    client: tenure.Client = make_client()
    sem = client.semaphore("idle-sem")  # never set: its waiters wait for a release
    latch = client.count_down_latch("idle-latch")
    assert latch.try_set_count(1)
    jobs = [spawn(lambda: sem.acquire(timeout=30)) for _ in range(5)]
    jobs += [spawn(latch.wait, 30) for _ in range(5)]
    assert wait_until(lambda: len(r.pubsub_channels()) == 2, 5)
    assert wait_until(lambda: waiting(client) == 10, 10)  # every waiter past its last attempt
    monitor = Monitor(server)
    time.sleep(1.5)
    commands = monitor.commands()
    assert commands == [], f"idle waiters sent {commands}"
    sem.release(5)
    latch.count_down()
    assert all(job.result(10) for job in jobs)


def test_permit_waiter_retries_only_at_the_expiry(
    server: Server, r: redis.Redis, make_client
) -> None:
    sem = make_client().permit_expirable_semaphore("exp-wait")
    assert sem.try_set_permits(1)
    assert sem.acquire(lease_time=1.2) is not None
    waiter = spawn(make_client().permit_expirable_semaphore("exp-wait").acquire)
    assert wait_until(lambda: r.pubsub_channels() == [b"redisson_sc:{exp-wait}"], 5)
    monitor = Monitor(server)
    start = time.monotonic()
    assert waiter.result(10) is not None
    waited = time.monotonic() - start
    commands = monitor.commands()
    attempts = [c for c in commands if c.startswith("EVALSHA")]
    assert waited < 1.2 + 0.5
    assert 1 <= len(attempts) <= 2, commands  # the attempt at the expiry (and one at most early)
