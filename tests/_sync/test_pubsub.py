# GENERATED from tests/_async/test_pubsub.py by tools/unasync.py: edit that file, not this one.
"""The shared pub/sub connection: one per client, resubscribed after a reconnect."""

from __future__ import annotations

from functools import partial

from support.twins import Event, spawn, wait_until
from support.wire import pubsub_clients


def test_many_waiters_share_one_connection(make_client, r):
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

    jobs = [spawn(partial(take, names[i % 2])) for i in range(20)]
    assert wait_until(lambda: len(r.pubsub_channels()) == 2, 5, 0.02)
    assert pubsub_clients(r) == 1
    holder.force_release()
    make_client().lock("other").force_release()
    for job in jobs:
        job.join(20)
    assert sorted(acquired) == sorted(names * 10)  # every waiter had its turn


def test_waiter_survives_pubsub_reconnect(make_client, r):
    holder = make_client().lock("re")
    holder.acquire()  # 30 s lease: only an unlock message can wake the waiter soon
    waiter = make_client().lock("re")
    got = Event()

    def wait() -> None:
        if waiter.acquire(timeout=20):
            got.set()
            waiter.release()  # the owner is this caller

    job = spawn(wait)
    channel = [b"redisson_lock__channel:{re}"]
    assert wait_until(lambda: r.pubsub_channels() == channel, 5, 0.02)
    assert r.client_kill_filter(_type="pubsub") >= 1
    assert wait_until(
        lambda: r.pubsub_channels() == channel and pubsub_clients(r) == 1, 5, 0.02
    )
    holder.release()
    assert got.wait(2), "the waiter missed the unlock after its listener reconnected"
    job.result()
