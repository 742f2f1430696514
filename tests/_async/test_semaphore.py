# Semaphore on a real server (asyncio source of tests/_sync/test_semaphore.py).
"""Semaphore: twins of Redisson's RedissonSemaphoreTest scenarios, the wire layout read with
raw redis-py, wake-up latency, and waiting that sends no command."""

from __future__ import annotations

import logging
import re
import time
import uuid

import pytest

import tenure
from support.twins import AsyncEvent, async_gather, async_sleep, async_spawn, async_wait_until
from support.wire import max_concurrency


def listeners(r, channel: str) -> int:
    """Connections subscribed to ``channel`` (whatever other tests left subscribed)."""
    return int(r.pubsub_numsub(channel)[0][1])


def asleep(client: tenure.AsyncClient, channel: str) -> int:
    """Waiters of ``client`` asleep on ``channel`` with no wake-up pending, as the client's
    own parking table says: each past its last attempt, sleeping or reading the socket."""
    count = 0
    for listener in list(client._runner._listener._by_node.values()):
        entry = listener._parking.channels.get(channel)
        if entry is None:
            continue
        idle = [key for key, ticket in list(entry.tickets.items()) if not ticket.permit]
        table = listener._table
        count += sum(1 for key in idle if key in table.sleepers or table.reader == key)
    return count


def script_runs(r) -> int:
    """Scripts the server ran (EVAL/EVALSHA calls, not the commands inside them)."""
    stats = r.info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items() if k.startswith("cmdstat_eval"))


async def test_wire_layout_is_redissons(async_client, r):
    sem = async_client.semaphore("pool")
    pubsub = r.pubsub()
    pubsub.subscribe("redisson_sc:{pool}")
    assert pubsub.get_message(timeout=1)["type"] == "subscribe"
    assert await sem.try_set_permits(3)
    assert r.type("pool") == b"string"
    assert r.get("pool") == b"3"
    assert r.ttl("pool") == -1
    assert pubsub.get_message(timeout=2)["data"] == b"3"
    assert await sem.acquire(2)
    assert r.get("pool") == b"1"
    await sem.release()
    assert pubsub.get_message(timeout=2)["data"] == b"2"  # the new count
    assert r.keys("*") == [b"pool"]
    pubsub.close()


async def test_redisson_written_count_is_read(async_client, r):
    r.set("shared", 2)  # as a Redisson client's trySetPermits(2) leaves it
    sem = async_client.semaphore("shared")
    assert await sem.available_permits() == 2
    assert await sem.acquire(2, blocking=False)
    assert r.get("shared") == b"0"


async def test_name_prefix_is_prepended(async_make_client, r):
    sem = async_make_client(name_prefix="app:").semaphore("s")
    await sem.set_permits(1)
    assert sem.name == "s"
    assert r.get("app:s") == b"1"
    assert not r.exists("s")


async def test_acquire_without_permits_set_waits(async_client, r):
    # Redisson testAcquireWithoutSetPermits: a count never set has no permits.
    sem = async_client.semaphore("unset")
    assert not await sem.acquire(blocking=False)
    assert not await sem.acquire(timeout=0.2)
    job = async_spawn(sem.acquire)
    assert await async_wait_until(lambda: listeners(r, "redisson_sc:{unset}") == 1, 5)
    assert not job.done()
    await sem.release()  # any caller may add permits by releasing
    assert await job.result(10) is True
    assert await sem.available_permits() == 0


async def test_a_wait_on_permits_never_set_is_said_once(async_client, caplog):
    # issue 26 item 8: `with sem:` on a count nobody set blocks; the first wait says why.
    caplog.set_level(logging.WARNING, logger="tenure")
    name = f"never-{uuid.uuid4().hex[:8]}"  # said once per name and process
    sem = async_client.semaphore(name)
    assert not await sem.acquire(blocking=False)  # no wait: nothing to say
    assert not await sem.acquire(timeout=0.2)
    assert not await sem.acquire(timeout=0.2)
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(said) == 1, said
    assert name in said[0]
    assert "never set" in said[0]
    caplog.clear()
    other = async_client.semaphore(f"set-{name}")
    await other.set_permits(1)
    assert await other.acquire()
    assert not await other.acquire(timeout=0.2)  # too few, but set: no word
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_try_set_permits_only_once(async_client):
    sem = async_client.semaphore("once")
    assert await sem.try_set_permits(10)
    assert not await sem.try_set_permits(15)
    assert await sem.available_permits() == 10


async def test_zero_permits(async_client):
    sem = async_client.semaphore("zero")
    assert await sem.try_set_permits(0)
    assert not await sem.acquire(blocking=False)
    assert await sem.available_permits() == 0


async def test_add_and_reduce_permits(async_client):
    # Redisson testAddPermits / testReducePermits.
    sem = async_client.semaphore("add")
    await sem.try_set_permits(10)
    await sem.add_permits(5)
    assert await sem.available_permits() == 15
    await sem.add_permits(-20)
    assert await sem.available_permits() == -5
    assert not await sem.acquire(blocking=False)
    await sem.add_permits(6)
    assert await sem.acquire(blocking=False)


async def test_set_permits_overrides(async_client):
    sem = async_client.semaphore("set")
    await sem.try_set_permits(3)
    assert await sem.acquire(3)
    await sem.set_permits(5)
    assert await sem.available_permits() == 5


async def test_drain_permits(async_client):
    sem = async_client.semaphore("drain")
    assert await sem.drain_permits() == 0
    await sem.try_set_permits(10)
    assert await sem.acquire(3)
    assert await sem.drain_permits() == 7
    assert await sem.available_permits() == 0


async def test_release_without_acquire_adds_permits(async_client):
    sem = async_client.semaphore("rel")
    await sem.release()
    await sem.release(2)
    assert await sem.available_permits() == 3


async def test_acquire_n_waits_for_enough(async_client):
    # Redisson testBlockingNAcquire: a waiter for 3 permits is not served by 2.
    sem = async_client.semaphore("n")
    await sem.try_set_permits(1)
    job = async_spawn(sem.acquire, 3)
    await sem.release()
    assert not await job.join(0.5)
    await sem.release()
    assert await job.result(10) is True
    assert await sem.available_permits() == 0


async def test_mixed_waiters_of_one_client_are_all_served(async_client, r):
    # One release message wakes every waiter of the client: a waiter for 1 permit is not
    # left asleep because a waiter for 3 took the wake-up.
    sem = async_client.semaphore("mixed")
    await sem.try_set_permits(0)
    big = async_spawn(sem.acquire, 3)
    small = async_spawn(sem.acquire, 1)
    assert await async_wait_until(lambda: asleep(async_client, "redisson_sc:{mixed}") == 2, 5)
    await sem.release(1)
    assert await small.result(5) is True
    assert not big.done()
    await sem.release(3)
    assert await big.result(5) is True


async def test_with_block_and_timeout(async_client):
    sem = async_client.semaphore("with")
    await sem.try_set_permits(1)
    async with sem:
        assert await sem.available_permits() == 0
        with pytest.raises(tenure.LockTimeout):
            async with sem(timeout=0.1):
                pass
    assert await sem.available_permits() == 1


async def test_bad_arguments_raise_before_io(async_client, r):
    sem = async_client.semaphore("bad")
    for call, error, message in [
        (lambda: sem.acquire(0), ValueError, "permits must be >= 1, not 0"),
        (lambda: sem.acquire(-1), ValueError, "permits must be >= 1, not -1"),
        (lambda: sem.acquire(1.5), TypeError, "permits must be an int, not float"),
        (lambda: sem.acquire(True), TypeError, "permits must be an int, not bool"),
        (lambda: sem.acquire(timeout=float("nan")), ValueError, "timeout must not be NaN"),
        (lambda: sem.acquire(timeout=-2), ValueError, "timeout must be >= 0, None or -1, not -2"),
        (lambda: sem.release(0), ValueError, "permits must be >= 1, not 0"),
        (lambda: sem.try_set_permits(-1), ValueError, "permits must be >= 0, not -1"),
        (lambda: sem.set_permits("3"), TypeError, "permits must be an int, not str"),
        (lambda: sem.add_permits(None), TypeError, "permits must be an int, not NoneType"),
    ]:
        with pytest.raises(error, match=re.escape(message)):
            call()
    assert r.keys("*") == []
    with pytest.raises(ValueError, match="name must not be empty"):
        async_client.semaphore("")


async def test_concurrency_never_exceeds_permits(async_make_client):
    # Redisson testConcurrency_MultiInstance: 3 clients x 4 tasks on 2 permits.
    clients = [async_make_client() for _ in range(3)]
    await clients[0].semaphore("conc").try_set_permits(2)
    spans: list[tuple[int, int]] = []

    async def work(client: tenure.AsyncClient) -> None:
        sem = client.semaphore("conc")
        for _ in range(5):
            async with sem:
                enter = time.monotonic_ns()
                await async_sleep(0.005)
                spans.append((enter, time.monotonic_ns()))

    await async_gather(*[lambda c=c: work(c) for c in clients for _ in range(4)])
    assert len(spans) == 60
    assert max_concurrency(spans) == 2
    assert await clients[0].semaphore("conc").available_permits() == 2


async def test_blocked_acquire_wakes_soon_after_release(async_make_client, r):
    holder = async_make_client().semaphore("wake")
    await holder.try_set_permits(1)
    assert await holder.acquire()
    client = async_make_client()
    waiter = client.semaphore("wake")
    got = AsyncEvent()
    woke: list[float] = []

    async def wait() -> None:
        assert await waiter.acquire(timeout=20)
        woke.append(time.monotonic())
        got.set()

    job = async_spawn(wait)
    assert await async_wait_until(lambda: listeners(r, "redisson_sc:{wake}") == 1, 5)
    assert await async_wait_until(lambda: asleep(client, "redisson_sc:{wake}") == 1, 5)
    released = time.monotonic()
    await holder.release()
    assert await got.wait(5)
    await job.result()
    assert woke[0] - released < 0.1, f"woke {woke[0] - released:.3f} s after the release"


async def test_a_negative_count_from_another_client_wakes_waiters(async_client, r):
    """A Redisson client may publish a count <= 0 on the semaphore's channel (``-5``): it is
    a count like any other and wakes the waiters, never a lock's renewal message."""
    sem = async_client.semaphore("negative")
    job = async_spawn(lambda: sem.acquire(timeout=20))
    assert await async_wait_until(lambda: listeners(r, "redisson_sc:{negative}") == 1, 5)
    assert await async_wait_until(lambda: asleep(async_client, "redisson_sc:{negative}") == 1, 5)
    r.set("negative", 1)  # a permit appears without a message of its own
    r.publish("redisson_sc:{negative}", "-5")
    assert await job.join(2), "the -5 did not wake the waiter"
    assert await job.result() is True


async def test_waiters_share_one_pubsub_connection(async_make_client, r):
    client = async_make_client()
    sems = [client.semaphore(f"share{i % 2}") for i in range(10)]
    jobs = [async_spawn(sem.acquire) for sem in sems]
    channels = ["redisson_sc:{share0}", "redisson_sc:{share1}"]
    assert await async_wait_until(lambda: [listeners(r, c) for c in channels] == [1, 1], 5)
    assert len(client._runner._listener._by_node) == 1  # one pub/sub connection for both
    await async_make_client().semaphore("share0").release(5)
    await async_make_client().semaphore("share1").release(5)
    for job in jobs:
        assert await job.result(10) is True
    assert await async_wait_until(lambda: [listeners(r, c) for c in channels] == [0, 0], 5)


async def test_a_release_of_n_permits_wakes_n_waiters_of_a_client(async_client, r):
    # issue 27 item 2: the message is the count now available; it wakes that many of the
    # client's waiters for one permit, not all of them (each woken one runs one attempt).
    sem = async_client.semaphore("count")
    await sem.try_set_permits(0)
    jobs = [async_spawn(lambda: sem.acquire(timeout=20)) for _ in range(5)]
    assert await async_wait_until(lambda: asleep(async_client, "redisson_sc:{count}") == 5, 5)
    before = script_runs(r)
    await sem.release(2)
    assert await async_wait_until(lambda: sum(job.done() for job in jobs) == 2, 5)
    assert await async_wait_until(lambda: asleep(async_client, "redisson_sc:{count}") == 3, 5)
    assert script_runs(r) - before == 1 + 2  # the release, and one attempt per woken waiter
    await sem.release(3)
    for job in jobs:
        assert await job.result(10) is True
    assert await sem.available_permits() == 0


async def test_a_waiter_for_more_permits_does_not_take_a_smaller_ones_wake_up(async_client, r):
    # Waiters for 1, then 3, then 1 permit: a message "1" must reach a waiter for 1 even
    # when the oldest without a wake-up is the one for 3, which cannot use it.
    sem = async_client.semaphore("mixed3")
    await sem.try_set_permits(0)
    channel = "redisson_sc:{mixed3}"
    first = async_spawn(lambda: sem.acquire(timeout=20))
    assert await async_wait_until(lambda: asleep(async_client, channel) == 1, 5)
    big = async_spawn(lambda: sem.acquire(3, timeout=20))
    assert await async_wait_until(lambda: asleep(async_client, channel) == 2, 5)
    last = async_spawn(lambda: sem.acquire(timeout=20))
    assert await async_wait_until(lambda: asleep(async_client, channel) == 3, 5)
    await sem.release(1)
    assert await async_wait_until(lambda: first.done() or last.done(), 5)
    assert await async_wait_until(lambda: asleep(async_client, channel) == 2, 5)
    await sem.release(1)
    assert await first.result(5) is True
    assert await last.result(5) is True
    assert not big.done()
    await sem.release(3)
    assert await big.result(5) is True
