# CountDownLatch on a real server (asyncio source of tests/_sync/test_latch.py).
"""CountDownLatch: twins of Redisson's RedissonCountDownLatchTest scenarios, the wire layout
read with raw redis-py, and 50 waiters woken together."""

from __future__ import annotations

import time

import pytest

import tenure
from support.twins import (
    async_gather,
    async_spawn,
    async_stamped,
    async_wait_until,
)


def asleep(client: tenure.AsyncClient, channel: str) -> int:
    """Waiters of ``client`` asleep on ``channel`` with no wake-up pending (its own parking
    table: each past its last read, sleeping or reading the socket)."""
    count = 0
    for listener in list(client._runner._listener._by_node.values()):
        entry = listener._parking.channels.get(channel)
        table = listener._table
        for key, ticket in list(entry.tickets.items()) if entry is not None else []:
            count += not ticket.permit and (key in table.sleepers or table.reader == key)
    return count


def fenced(client: tenure.AsyncClient, channel: str) -> int:
    """Waiters of ``client`` on ``channel`` whose fence was answered (`tenure.core.parking`)."""
    return sum(
        ticket.fence == 0
        for listener in list(client._runner._listener._by_node.values())
        if (entry := listener._parking.channels.get(channel)) is not None
        for ticket in list(entry.tickets.values())
    )


def reads(r) -> int:
    """GET commands the server ran (a latch waiter reads the count with one)."""
    return int(r.info("commandstats").get("cmdstat_get", {}).get("calls", 0))


async def settled(client: tenure.AsyncClient, r, channel: str, n: int, before: int) -> bool:
    """True once ``n`` waiters of ``client`` sleep on ``channel`` past their last read:
    each read the count twice since ``before`` (``reads()``), once before it subscribed and
    once after. `asleep()` alone counts a waiter reading the socket for its own SUBSCRIBE's
    answer, its second read still to come: a count-down then is read, not heard (1 extra
    GET in 59 of 200 rounds beside 2 busy loops)."""
    return await async_wait_until(
        lambda: reads(r) - before == 2 * n and asleep(client, channel) == n, 5
    )


async def test_wire_layout_is_redissons(async_client, r):
    latch = async_client.count_down_latch("warmup")
    pubsub = r.pubsub()
    pubsub.subscribe("redisson_countdownlatch__channel__{warmup}")
    assert pubsub.get_message(timeout=1)["type"] == "subscribe"
    assert await latch.try_set_count(2)
    assert r.type("warmup") == b"string"
    assert r.get("warmup") == b"2"
    assert pubsub.get_message(timeout=2)["data"] == b"1"  # count set
    await latch.count_down()
    assert r.get("warmup") == b"1"
    await latch.count_down()
    assert not r.exists("warmup")
    assert pubsub.get_message(timeout=2)["data"] == b"0"  # reached zero
    pubsub.close()


async def test_hash_tagged_name_keeps_the_braced_channel(async_client, r):
    latch = async_client.count_down_latch("{job}:ready")
    pubsub = r.pubsub()
    pubsub.subscribe("redisson_countdownlatch__channel__{{job}:ready}")
    assert pubsub.get_message(timeout=1)["type"] == "subscribe"
    await latch.try_set_count(1)
    await latch.count_down()
    assert pubsub.get_message(timeout=2)["data"] == b"1"
    assert pubsub.get_message(timeout=2)["data"] == b"0"
    pubsub.close()


async def test_count_and_try_set_count(async_client):
    # Redisson testCountDown / testTrySetCount.
    latch = async_client.count_down_latch("c")
    assert await latch.count() == 0
    assert await latch.try_set_count(3)
    assert not await latch.try_set_count(10)
    assert await latch.count() == 3
    await latch.count_down()
    assert await latch.count() == 2
    await latch.count_down()
    await latch.count_down()
    assert await latch.count() == 0
    await latch.count_down()  # below zero: stays 0
    assert await latch.count() == 0
    assert await latch.try_set_count(1)  # gone at zero: may be set again


async def test_wait_returns_at_once_when_zero(async_client):
    latch = async_client.count_down_latch("none")
    assert await latch.wait()
    assert await latch.wait(0)


async def test_wait_times_out(async_client):
    # Redisson testAwaitTimeoutFail.
    latch = async_client.count_down_latch("slow")
    await latch.try_set_count(1)
    start = time.monotonic()
    assert not await latch.wait(0.3)
    assert 0.25 < time.monotonic() - start < 3
    assert not await latch.wait(0)


async def test_wait_ends_on_count_down_from_another_client(async_make_client):
    # Redisson testAwaitTimeout: counted down by another instance.
    latch = async_make_client().count_down_latch("other")
    await latch.try_set_count(2)
    job = async_spawn(latch.wait, 20)
    other = async_make_client().count_down_latch("other")
    await other.count_down()
    assert not await job.join(0.3)
    await other.count_down()
    assert await job.result(5) is True


async def test_delete_wakes_waiters(async_client):
    latch = async_client.count_down_latch("del")
    assert not await latch.delete()
    await latch.try_set_count(5)
    job = async_spawn(latch.wait, 20)
    assert not await job.join(0.2)
    assert await latch.delete()
    assert await job.result(5) is True


async def test_delete_publishes_count_set_as_redisson(async_client, r):
    """Redisson's delete publishes ``1`` (new count), not ``0``; every waiter of the
    client still wakes (each reads the count again and finds none)."""
    latch = async_client.count_down_latch("redel")
    await latch.try_set_count(3)
    pubsub = r.pubsub()
    pubsub.subscribe("redisson_countdownlatch__channel__{redel}")
    assert pubsub.get_message(timeout=1)["type"] == "subscribe"
    jobs = [async_spawn(latch.wait, 20) for _ in range(3)]
    channel = b"redisson_countdownlatch__channel__{redel}"
    assert await async_wait_until(lambda: r.pubsub_numsub(channel)[0][1] == 2, 5)
    assert not any([await job.join(0.1) for job in jobs])
    assert await latch.delete()
    assert pubsub.get_message(timeout=2)["data"] == b"1"
    assert [await job.result(5) for job in jobs] == [True, True, True]
    pubsub.close()


async def test_fifty_waiters_wake_together(async_make_client, r):
    latch = async_make_client().count_down_latch("fifty")
    await latch.try_set_count(1)
    clients = [async_make_client() for _ in range(5)]
    waiters = [c.count_down_latch("fifty") for c in clients for _ in range(10)]
    jobs = [async_spawn(async_stamped, lambda w=w: w.wait(30)) for w in waiters]
    channel = b"redisson_countdownlatch__channel__{fifty}"
    assert await async_wait_until(lambda: r.pubsub_numsub(channel)[0][1] == 5, 10)
    assert await async_wait_until(lambda: sum(asleep(c, channel.decode()) for c in clients) == 50)
    counted = time.monotonic()
    await latch.count_down()
    results = [await job.result(10) for job in jobs]
    assert all(ok for ok, _ in results)
    latest = max(at for _, at in results) - counted
    assert latest < 0.1, f"the last waiter woke {latest:.3f} s after the count-down"


async def test_bad_arguments_raise_before_io(async_client, r):
    latch = async_client.count_down_latch("bad")
    for call, error in [
        (lambda: latch.try_set_count(0), ValueError),
        (lambda: latch.try_set_count(-3), ValueError),
        (lambda: latch.try_set_count(2.0), TypeError),
        (lambda: latch.wait(float("nan")), ValueError),
        (lambda: latch.wait(-5), ValueError),
    ]:
        with pytest.raises(error):
            call()
    assert r.keys("*") == []


async def test_many_counters(async_make_client):
    latch = async_make_client().count_down_latch("many")
    await latch.try_set_count(20)
    clients = [async_make_client() for _ in range(4)]
    await async_gather(
        *[lambda c=c: c.count_down_latch("many").count_down() for c in clients for _ in range(5)]
    )
    assert await latch.count() == 0
    assert await latch.wait(0)


async def test_a_waiter_that_made_the_subscription_takes_zero_at_its_word(async_client, r):
    # The "0" reached a waiter whose own SUBSCRIBE serves it: it is newer than the wait, so
    # the waiter returns without reading the count again.
    latch = async_client.count_down_latch("onehop")
    await latch.try_set_count(1)
    began = reads(r)
    job = async_spawn(lambda: latch.wait(timeout=20))
    channel = "redisson_countdownlatch__channel__{onehop}"
    assert await settled(async_client, r, channel, 1, began)
    before = reads(r)
    await latch.count_down()
    assert await job.result(10) is True
    assert reads(r) - before == 0


async def test_joiners_take_a_zero_after_their_fence_at_its_word(async_client, r):
    # Waiters that joined the subscription the first made (each fenced by a SUBSCRIBE sent
    # again, or sharing one) return on the "0" with no read of the count.
    latch = async_client.count_down_latch("fenced")
    await latch.try_set_count(1)
    channel = "redisson_countdownlatch__channel__{fenced}"
    began = reads(r)
    jobs = [async_spawn(lambda: latch.wait(timeout=20))]
    assert await settled(async_client, r, channel, 1, began)
    jobs += [async_spawn(lambda: latch.wait(timeout=20)) for _ in range(5)]
    assert await settled(async_client, r, channel, 6, began)
    assert await async_wait_until(lambda: fenced(async_client, channel) == 6, 5)
    before = reads(r)
    await latch.count_down()
    for job in jobs:
        assert await job.result(10) is True
    assert reads(r) - before == 0


async def test_reaching_zero_wakes_all_of_a_clients_waiters_at_once(async_client, r):
    # One "0" wakes the five waiters together; a waiter that joined a subscription already
    # there reads the count once more if its fence was not answered yet (the "0" might
    # predate its wait), no waiter twice.
    latch = async_client.count_down_latch("together")
    await latch.try_set_count(1)
    began = reads(r)
    jobs = [async_spawn(lambda: latch.wait(timeout=20)) for _ in range(5)]
    channel = "redisson_countdownlatch__channel__{together}"
    assert await settled(async_client, r, channel, 5, began)
    before = reads(r)
    await latch.count_down()
    for job in jobs:
        assert await job.result(10) is True
    assert reads(r) - before <= 4


async def test_a_zero_published_before_a_wait_began_is_not_its_own(async_make_client, r):
    # Another waiter of the client reads the pub/sub socket. In one script the latch reaches
    # zero ("0") and is set again ("1"); a wait that starts after that script may still get
    # the "0", on its way to the client: it must not take it for its own (the count is 1
    # during the whole wait). Before the fix, 12-19 rounds in 100 returned True.
    client = async_make_client()
    wrong = 0
    for i in range(40):
        name = f"stale{i}"
        latch = client.count_down_latch(name)
        await latch.try_set_count(1)
        channel = f"redisson_countdownlatch__channel__{{{name}}}"
        began = reads(r)
        first = async_spawn(lambda latch=latch: latch.wait(timeout=5))
        # Subscribed, and past its read after that: else it misses the "0" and sleeps out
        # its 5 s on the "1" (the count it reads).
        assert await settled(client, r, channel, 1, began)
        r.eval(
            "redis.call('del', KEYS[1]); redis.call('publish', ARGV[1], '0');"
            "redis.call('set', KEYS[1], 1); redis.call('publish', ARGV[1], '1')",
            1,
            name,
            channel,
        )
        wrong += await latch.wait(timeout=0.05) is True
        assert await first.result(5) is True  # it was waiting when the count reached zero
    assert wrong == 0


async def test_a_zero_older_than_the_waiters_first_read_is_not_its_own(async_client, r):
    # A "0" still unread on the client's lingering subscription, the latch set again since:
    # a new wait must not take that old "0" for its latch reaching zero.
    latch = async_client.count_down_latch("again")
    await latch.try_set_count(1)
    job = async_spawn(lambda: latch.wait(timeout=20))
    channel = "redisson_countdownlatch__channel__{again}"
    assert await async_wait_until(lambda: asleep(async_client, channel) == 1, 5)
    await latch.count_down()
    assert await job.result(10) is True  # the client's subscription lingers a while
    r.publish(channel, "0")  # an old round reaching zero, unread yet ...
    r.set("again", 1)  # ... and the latch set again before the next wait
    assert await latch.wait(timeout=0.3) is False
