# The shared pub/sub connection (asyncio source of tests/_sync/test_pubsub.py).
"""The shared pub/sub connection: one per client, resubscribed after a reconnect."""

from __future__ import annotations

import time
from functools import partial

import pytest

from support.twins import AsyncEvent, async_sleep, async_spawn, async_wait_until
from support.wire import numsub, pubsub_clients
from tenure import keys
from tenure._concurrency import async_waiter_key


async def test_many_waiters_share_one_connection(async_make_client, r):
    holder = async_make_client().lock("shared")
    await holder.acquire()
    client = async_make_client()
    names = ["shared", "other"]
    await async_make_client().lock("other").acquire()
    acquired = []

    async def take(name: str) -> None:
        lock = client.lock(name)
        if await lock.acquire(timeout=10):
            acquired.append(name)
            await lock.release()

    jobs = [async_spawn(partial(take, names[i % 2])) for i in range(20)]
    channels = [keys.lock_channel(name) for name in names]
    assert await async_wait_until(lambda: [numsub(r, c) for c in channels] == [1, 1], 5, 0.02)
    assert pubsub_clients(r) == 1
    await holder.force_release()
    await async_make_client().lock("other").force_release()
    for job in jobs:
        await job.join(20)
    assert sorted(acquired) == sorted(names * 10)  # every waiter had its turn


async def test_waiter_survives_pubsub_reconnect(async_make_client, r):
    holder = async_make_client().lock("re")
    await holder.acquire()  # 30 s lease: only an unlock message can wake the waiter soon
    waiter = async_make_client().lock("re")
    got = AsyncEvent()

    async def wait() -> None:
        if await waiter.acquire(timeout=20):
            got.set()
            await waiter.release()  # the owner is this caller

    job = async_spawn(wait)
    channel = keys.lock_channel("re")
    assert await async_wait_until(lambda: numsub(r, channel) == 1, 5, 0.02)
    assert r.client_kill_filter(_type="pubsub") >= 1
    assert await async_wait_until(
        lambda: numsub(r, channel) == 1 and pubsub_clients(r) == 1, 5, 0.02
    )
    await holder.release()
    assert await got.wait(2), "the waiter missed the unlock after its listener reconnected"
    await job.result()


async def test_a_lone_waiter_reads_its_unlock_itself(async_make_client, r):
    """Issue 14 item 3: the waiting thread (task) reads the shared pub/sub socket itself, so
    the unlock that wakes it is handed to the listener's table on its own thread: no hop
    from a reader thread to the waiter. Before: a reader thread (task) read every reply and
    woke the waiter through a condition."""
    holder = async_make_client().lock("hop")
    await holder.acquire()  # 30 s lease: only the unlock wakes the waiter
    client = async_make_client()
    waiters: list[object] = []
    readers: list[object] = []  # who handed each unlock message to the table

    async def wait() -> None:
        waiters.append(async_waiter_key())
        lock = client.lock("hop")
        assert await lock.acquire(timeout=10)
        await lock.release()

    channel = keys.lock_channel("hop")
    job = async_spawn(wait)
    assert await async_wait_until(lambda: r.pubsub_numsub(channel)[0][1] == 1)
    listener = client._runner._listener._by_channel[channel]
    received = listener._parking.received

    def spy(kind: str, name: str, payload: str) -> object:
        if kind == "message" and not payload.startswith(keys.RENEWED_PREFIX):
            readers.append(async_waiter_key())
        return received(kind, name, payload)

    listener._parking.received = spy
    await holder.release()
    await job.result(10)
    assert readers[:1] == waiters


async def test_a_reader_that_stops_waiting_hands_the_socket_on(async_make_client, r):
    """The waiter reading the shared socket (the first to wait, on lock x) is woken and
    takes x, and holds it: the waiter of another lock (y), asleep meanwhile, takes the
    socket over, so the unlock of y wakes it at once, not at y's lease end (30 s)."""
    x, y = async_make_client().lock("relay-x"), async_make_client().lock("relay-y")
    await x.acquire()
    await y.acquire()
    client = async_make_client()
    took_x, took_y = AsyncEvent(), AsyncEvent()

    async def take(name: str, took: AsyncEvent, hold_until: AsyncEvent | None) -> None:
        lock = client.lock(name)
        assert await lock.acquire(timeout=20)
        took.set()
        if hold_until is not None:  # x's waiter holds x while y is released
            assert await hold_until.wait(10)
        await lock.release()

    def numsub(name: str) -> int:
        return int(r.pubsub_numsub(keys.lock_channel(name))[0][1])

    first = async_spawn(partial(take, "relay-x", took_x, took_y))
    assert await async_wait_until(lambda: numsub("relay-x") == 1)
    second = async_spawn(partial(take, "relay-y", took_y, None))
    assert await async_wait_until(lambda: numsub("relay-y") == 1)
    await x.release()
    assert await took_x.wait(5)
    started = time.monotonic()
    await y.release()
    assert await took_y.wait(5)
    assert time.monotonic() - started < 1.0, "y's waiter slept on to the lease end"
    await first.result()
    await second.result()


async def test_a_refused_subscribe_is_an_error_for_its_channel_only(async_make_client, server, r):
    """Issue 9 item 13: an ACL that forbids a lock's channel is no connection loss. Its
    waiter gets a BackendError naming the channel at once; the listener does not
    reconnect; a waiter on an allowed channel of the same client is not disturbed."""
    import time

    import tenure

    r.acl_setuser(
        "limited", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all"],
        channels=["redisson_lock__channel:{open}"], reset_channels=True,
    )
    holder = async_make_client()
    await holder.lock("open").acquire()
    await holder.lock("closed").acquire()
    url = server.url.replace("redis://", "redis://limited:pw@")
    client = tenure.AsyncClient(url)
    try:
        allowed = client.lock("open")

        async def take() -> bool:
            got = await allowed.acquire(timeout=20)
            if got:
                await allowed.release()
            return got

        job = async_spawn(take)
        channel = keys.lock_channel("open")
        assert await async_wait_until(lambda: numsub(r, channel) == 1, 5, 0.02)
        before = {c["id"] for c in r.client_list() if c["user"] == "limited" and c["sub"] != "0"}
        assert len(before) == 1

        started = time.monotonic()
        closed = r"redisson_lock__channel:\{closed\}"
        with pytest.raises(tenure.BackendError, match=closed) as refused:
            await client.lock("closed").acquire(timeout=20)
        assert "NOPERM" in str(refused.value) or "permission" in str(refused.value).lower()
        assert time.monotonic() - started < 2.0  # no socket timeout, no retry loop
        await async_sleep(0.3)  # a reconnect loop would show here
        after = {c["id"] for c in r.client_list() if c["user"] == "limited" and c["sub"] != "0"}
        assert after == before  # the same pub/sub connection: never reconnected
        assert not job.done()  # the other channel's waiter was not woken into failure
        await holder.lock("open").release()
        assert await job.result(10) is True
    finally:
        await client.close()
        r.acl_deluser("limited")


async def test_idle_waiters_send_nothing_while_their_holder_renews(async_make_client, r):
    """Issue 14 item 5: 50 waiters of one client on a lock whose holder renews every 1 s
    (3 s lease). Each renewal tells the lock's channel the new lease (``-3000``): the waiters
    sleep on past the lease end they saw, and send nothing until the unlock wakes them one
    at a time. Before: each waiter re-checked at every lease end it saw (about 50 attempts
    per lease); then only the oldest did (2 attempts in these 4 s)."""
    holder = async_make_client(watchdog_timeout=3.0)
    await holder.lock("crowd").acquire()
    client = async_make_client()
    done = []

    async def take() -> None:
        lock = client.lock("crowd")
        if await lock.acquire(timeout=30):
            done.append(1)
            await lock.release()

    def attempts() -> int:  # each acquire attempt runs one PTTL (renewals run none)
        return int(r.info("commandstats").get("cmdstat_pttl", {}).get("calls", 0))

    channel = keys.lock_channel("crowd")
    start = attempts()
    jobs = [async_spawn(take) for _ in range(50)]
    assert await async_wait_until(lambda: numsub(r, channel) == 1)

    def parked() -> int:  # this client's waiters of the channel now in their Wait: asleep,
        # or the one reading the shared socket meanwhile (core/listening.py)
        table = client._runner._listener._by_channel[channel]._table
        entry = table.parking.channels.get(channel)
        waiting = set(table.sleepers) | {table.reader}
        return 0 if entry is None else len(waiting & entry.tickets.keys())

    # every attempt before a wait is over once all 50 wait (the first attempts at least)
    assert await async_wait_until(lambda: parked() == 50 and attempts() - start >= 50, 10)
    before = attempts()
    await async_sleep(4.0)  # past the lease end the first attempts saw, and one more
    idle = attempts() - before
    assert idle == 0, f"{idle} attempts from 50 idle waiters in 4 s"
    await holder.lock("crowd").release()
    for job in jobs:
        await job.join(20)
    assert len(done) == 50  # every waiter had its turn, one unlock at a time
