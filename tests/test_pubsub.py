"""The shared pub/sub connection: one per client, resubscribed after a reconnect."""

from __future__ import annotations

import threading
import time


def wait_until(predicate, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def pubsub_clients(r) -> int:
    return sum(1 for c in r.client_list() if int(c.get("sub", 0)) + int(c.get("ssub", 0)) > 0)


def test_many_waiting_threads_share_one_connection(make_client, r):
    holder = make_client().lock("shared")
    holder.acquire()
    client = make_client()
    names = ["shared", "other"]
    make_client().lock("other").acquire()
    acquired = []

    def take(name: str) -> None:
        lock = client.lock(name)
        if lock.acquire(timeout=10):
            acquired.append(name)
            lock.release()

    threads = [threading.Thread(target=take, args=(names[i % 2],)) for i in range(20)]
    for t in threads:
        t.start()
    assert wait_until(lambda: len(r.pubsub_channels()) == 2)
    assert pubsub_clients(r) == 1
    holder.force_release()
    make_client().lock("other").force_release()
    for t in threads:
        t.join(20)
    assert sorted(acquired) == sorted(names * 10)  # every waiter had its turn


def test_waiter_survives_pubsub_reconnect(make_client, r):
    holder = make_client().lock("re")
    holder.acquire()  # 30 s lease: only an unlock message can wake the waiter soon
    waiter = make_client().lock("re")
    got = threading.Event()
    t = threading.Thread(target=lambda: waiter.acquire(timeout=20) and got.set())
    t.start()
    assert wait_until(lambda: r.pubsub_channels() == [b"redisson_lock__channel:{re}"])
    assert r.client_kill_filter(_type="pubsub") >= 1
    assert wait_until(
        lambda: r.pubsub_channels() == [b"redisson_lock__channel:{re}"] and pubsub_clients(r) == 1
    )
    holder.release()
    assert got.wait(2), "the waiter missed the unlock after its listener reconnected"
    t.join()
