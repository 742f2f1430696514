# GENERATED from tests/_async/test_pubsub.py by tools/unasync.py: edit that file, not this one.
"""The shared pub/sub connection: one per client, resubscribed after a reconnect."""

from __future__ import annotations

import time
from functools import partial

import pytest

from support.twins import Event, sleep, spawn, wait_until
from support.wire import numsub, pubsub_clients
from tenure import keys
from tenure._concurrency import waiter_key


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
    channels = [keys.lock_channel(name) for name in names]
    assert wait_until(lambda: [numsub(r, c) for c in channels] == [1, 1], 5, 0.02)
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
    channel = keys.lock_channel("re")
    assert wait_until(lambda: numsub(r, channel) == 1, 5, 0.02)
    assert r.client_kill_filter(_type="pubsub") >= 1
    assert wait_until(
        lambda: numsub(r, channel) == 1 and pubsub_clients(r) == 1, 5, 0.02
    )
    holder.release()
    assert got.wait(2), "the waiter missed the unlock after its listener reconnected"
    job.result()


def test_a_lone_waiter_reads_its_unlock_itself(make_client, r):
    """Issue 14 item 3: the waiting thread (task) reads the shared pub/sub socket itself, so
    the unlock that wakes it is handed to the listener's table on its own thread: no hop
    from a reader thread to the waiter. Before: a reader thread (task) read every reply and
    woke the waiter through a condition."""
    holder = make_client().lock("hop")
    holder.acquire()  # 30 s lease: only the unlock wakes the waiter
    client = make_client()
    waiters: list[object] = []
    readers: list[object] = []  # who handed each unlock message to the table

    def wait() -> None:
        waiters.append(waiter_key())
        lock = client.lock("hop")
        assert lock.acquire(timeout=10)
        lock.release()

    channel = keys.lock_channel("hop")
    job = spawn(wait)
    assert wait_until(lambda: r.pubsub_numsub(channel)[0][1] == 1)
    listener = client._runner._listener._by_channel[channel]
    received = listener._parking.received

    def spy(kind: str, name: str, payload: str) -> object:
        if kind == "message" and not payload.startswith(keys.RENEWED_PREFIX):
            readers.append(waiter_key())
        return received(kind, name, payload)

    listener._parking.received = spy
    holder.release()
    job.result(10)
    assert readers[:1] == waiters


def test_a_reader_that_stops_waiting_hands_the_socket_on(make_client, r):
    """The waiter reading the shared socket (the first to wait, on lock x) is woken and
    takes x, and holds it: the waiter of another lock (y), asleep meanwhile, takes the
    socket over, so the unlock of y wakes it at once, not at y's lease end (30 s)."""
    x, y = make_client().lock("relay-x"), make_client().lock("relay-y")
    x.acquire()
    y.acquire()
    client = make_client()
    took_x, took_y = Event(), Event()

    def take(name: str, took: Event, hold_until: Event | None) -> None:
        lock = client.lock(name)
        assert lock.acquire(timeout=20)
        took.set()
        if hold_until is not None:  # x's waiter holds x while y is released
            assert hold_until.wait(10)
        lock.release()

    def numsub(name: str) -> int:
        return int(r.pubsub_numsub(keys.lock_channel(name))[0][1])

    first = spawn(partial(take, "relay-x", took_x, took_y))
    assert wait_until(lambda: numsub("relay-x") == 1)
    second = spawn(partial(take, "relay-y", took_y, None))
    assert wait_until(lambda: numsub("relay-y") == 1)
    x.release()
    assert took_x.wait(5)
    started = time.monotonic()
    y.release()
    assert took_y.wait(5)
    assert time.monotonic() - started < 1.0, "y's waiter slept on to the lease end"
    first.result()
    second.result()


def test_a_refused_subscribe_is_an_error_for_its_channel_only(make_client, server, r):
    """Issue 9 item 13: an ACL that forbids a lock's channel is no connection loss. Its
    waiter gets a BackendError naming the channel at once; the listener does not
    reconnect; a waiter on an allowed channel of the same client is not disturbed."""
    import time

    import tenure

    r.acl_setuser(
        "limited", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all"],
        channels=["redisson_lock__channel:{open}"], reset_channels=True,
    )
    holder = make_client()
    holder.lock("open").acquire()
    holder.lock("closed").acquire()
    url = server.url.replace("redis://", "redis://limited:pw@")
    client = tenure.Client(url)
    try:
        allowed = client.lock("open")

        def take() -> bool:
            got = allowed.acquire(timeout=20)
            if got:
                allowed.release()
            return got

        job = spawn(take)
        channel = keys.lock_channel("open")
        assert wait_until(lambda: numsub(r, channel) == 1, 5, 0.02)
        before = {c["id"] for c in r.client_list() if c["user"] == "limited" and c["sub"] != "0"}
        assert len(before) == 1

        started = time.monotonic()
        closed = r"redisson_lock__channel:\{closed\}"
        with pytest.raises(tenure.BackendError, match=closed) as refused:
            client.lock("closed").acquire(timeout=20)
        assert "NOPERM" in str(refused.value) or "permission" in str(refused.value).lower()
        assert time.monotonic() - started < 2.0  # no socket timeout, no retry loop
        sleep(0.3)  # a reconnect loop would show here
        after = {c["id"] for c in r.client_list() if c["user"] == "limited" and c["sub"] != "0"}
        assert after == before  # the same pub/sub connection: never reconnected
        assert not job.done()  # the other channel's waiter was not woken into failure
        holder.lock("open").release()
        assert job.result(10) is True
    finally:
        client.close()
        r.acl_deluser("limited")


def test_idle_waiters_send_nothing_while_their_holder_renews(make_client, r):
    """Issue 14 item 5: 50 waiters of one client on a lock whose holder renews every 1 s
    (3 s lease). Each renewal tells the lock's channel the new lease (``-3000``): the waiters
    sleep on past the lease end they saw, and send nothing until the unlock wakes them one
    at a time. Before: each waiter re-checked at every lease end it saw (about 50 attempts
    per lease); then only the oldest did (2 attempts in these 4 s)."""
    holder = make_client(watchdog_timeout=3.0)
    holder.lock("crowd").acquire()
    client = make_client()
    done = []

    def take() -> None:
        lock = client.lock("crowd")
        if lock.acquire(timeout=30):
            done.append(1)
            lock.release()

    def attempts() -> int:  # each acquire attempt runs one PTTL (renewals run none)
        return int(r.info("commandstats").get("cmdstat_pttl", {}).get("calls", 0))

    channel = keys.lock_channel("crowd")
    start = attempts()
    jobs = [spawn(take) for _ in range(50)]
    assert wait_until(lambda: numsub(r, channel) == 1)

    def parked() -> int:  # this client's waiters of the channel now in their Wait: asleep,
        # or the one reading the shared socket meanwhile (core/listening.py)
        table = client._runner._listener._by_channel[channel]._table
        entry = table.parking.channels.get(channel)
        waiting = set(table.sleepers) | {table.reader}
        return 0 if entry is None else len(waiting & entry.tickets.keys())

    # every attempt before a wait is over once all 50 wait (the first attempts at least)
    assert wait_until(lambda: parked() == 50 and attempts() - start >= 50, 10)
    before = attempts()
    sleep(4.0)  # past the lease end the first attempts saw, and one more
    idle = attempts() - before
    assert idle == 0, f"{idle} attempts from 50 idle waiters in 4 s"
    holder.lock("crowd").release()
    for job in jobs:
        job.join(20)
    assert len(done) == 50  # every waiter had its turn, one unlock at a time
