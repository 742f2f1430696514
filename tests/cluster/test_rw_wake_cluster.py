"""A ReadWriteLock's write unlock on a cluster wakes one waiting writer client (its client
channel shares the lock's slot: sharded pub/sub), and readers of two clients still all get
in (scripts/_rw_wake.lua)."""

from __future__ import annotations

import threading
import time

import pytest

import tenure
from support.cluster import Cluster, wait_until
from tenure import keys

pytestmark = pytest.mark.cluster

NAMES = ["rw:a", "{tenant}:rw"]


@pytest.mark.parametrize("name", NAMES)
def test_writers_of_three_clients_are_served_one_per_unlock(fresh: Cluster, name: str) -> None:
    clients = [tenure.Client(fresh.url) for _ in range(4)]
    try:
        holder = clients[0].read_write_lock(name).write_lock()
        assert holder.acquire(lease_time=20)
        got: list[float] = []

        def wait(client: tenure.Client) -> None:
            lock = client.read_write_lock(name).write_lock()
            if lock.acquire(timeout=15):
                got.append(time.monotonic())
                time.sleep(0.05)
                lock.release()

        threads = [threading.Thread(target=wait, args=(c,)) for c in clients[1:]]
        for t in threads:
            t.start()
        with fresh.master_of(name).client() as master:
            queue = keys.lock_wake_queue(name)
            wait_until(lambda: master.zcard(queue) == 3, 10, "3 clients queued")
        released = time.monotonic()
        holder.release()
        for t in threads:
            t.join(20)
        assert len(got) == 3
        assert max(got) - released < 2.0, max(got) - released  # never a lease end (20 s)
    finally:
        for c in clients:
            c.close()


@pytest.mark.parametrize("name", NAMES)
def test_readers_of_two_clients_get_in_together(fresh: Cluster, name: str) -> None:
    clients = [tenure.Client(fresh.url) for _ in range(3)]
    try:
        holder = clients[0].read_write_lock(name).write_lock()
        assert holder.acquire(lease_time=20)
        together = threading.Barrier(2)
        inside: list[float] = []

        def read(client: tenure.Client) -> None:
            lock = client.read_write_lock(name).read_lock()
            if lock.acquire(timeout=15):
                inside.append(time.monotonic())
                try:
                    together.wait(5)
                finally:
                    lock.release()

        threads = [threading.Thread(target=read, args=(c,)) for c in clients[1:]]
        for t in threads:
            t.start()
        with fresh.master_of(name).client() as master:
            queue = keys.lock_wake_queue(name)
            wait_until(lambda: master.zscore(queue, "readers") is not None, 10, "readers' mark")
        released = time.monotonic()
        holder.release()
        for t in threads:
            t.join(20)
        assert len(inside) == 2
        assert max(inside) - released < 1.0, max(inside) - released
    finally:
        for c in clients:
            c.close()
