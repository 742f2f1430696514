"""Sentinel: a client from ``Sentinel.master_for`` holds, follows a failover, acquires again,
and a waiter blocked across the failover gets the lock within its timeout."""

from __future__ import annotations

import threading
import time

import pytest

import tenure
from support.cluster import Sentinels, wait_until

pytestmark = pytest.mark.cluster


def test_hold_failover_new_acquire_and_waiter(sentinels: Sentinels) -> None:
    sentinel = sentinels.sentinel(socket_timeout=1)
    master = sentinel.master_for(Sentinels.NAME, socket_timeout=1, socket_connect_timeout=1)
    with tenure.Client(master) as c:
        lock = c.lock(
            "s",
        )
        assert lock.acquire(lease_time=2)
        result: list[bool] = []

        def wait() -> None:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    result.append(c.lock("s").acquire(timeout=deadline - time.monotonic()))
                    c.lock("s").release()
                    return
                except tenure.BackendError:
                    time.sleep(0.1)

        waiter = threading.Thread(target=wait)
        waiter.start()
        old = sentinels.master_port()
        sentinels.primary.kill()
        wait_until(lambda: sentinels.master_port() != old, 30, "the failover")
        waiter.join(30)
        assert result == [True]  # the lease ran out on the promoted replica, waiter got it
        started = time.monotonic()
        while True:
            try:
                assert c.lock("after").acquire(timeout=5)
                break
            except tenure.BackendError:
                assert time.monotonic() - started < 10
                time.sleep(0.1)
        c.lock("after").release()
