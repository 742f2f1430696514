# GENERATED from tests/_async/test_semaphore.py by tools/unasync.py: edit that file, not this one.
"""Semaphore: twins of Redisson's RedissonSemaphoreTest scenarios, the wire layout read with
raw redis-py, wake-up latency, and waiting that sends no command."""

from __future__ import annotations

import logging
import re
import time
import uuid

import pytest

import tenure
from support.twins import Event, gather, sleep, spawn, wait_until
from support.wire import max_concurrency


def listeners(r, channel: str) -> int:
    """Connections subscribed to ``channel`` (whatever other tests left subscribed)."""
    return int(r.pubsub_numsub(channel)[0][1])


def asleep(client: tenure.Client, channel: str) -> int:
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


def test_wire_layout_is_redissons(client, r):
    sem = client.semaphore("pool")
    pubsub = r.pubsub()
    pubsub.subscribe("redisson_sc:{pool}")
    assert pubsub.get_message(timeout=1)["type"] == "subscribe"
    assert sem.try_set_permits(3)
    assert r.type("pool") == b"string"
    assert r.get("pool") == b"3"
    assert r.ttl("pool") == -1
    assert pubsub.get_message(timeout=2)["data"] == b"3"
    assert sem.acquire(2)
    assert r.get("pool") == b"1"
    sem.release()
    assert pubsub.get_message(timeout=2)["data"] == b"2"  # the new count
    assert r.keys("*") == [b"pool"]
    pubsub.close()


def test_redisson_written_count_is_read(client, r):
    r.set("shared", 2)  # as a Redisson client's trySetPermits(2) leaves it
    sem = client.semaphore("shared")
    assert sem.available_permits() == 2
    assert sem.acquire(2, blocking=False)
    assert r.get("shared") == b"0"


def test_name_prefix_is_prepended(make_client, r):
    sem = make_client(name_prefix="app:").semaphore("s")
    sem.set_permits(1)
    assert sem.name == "s"
    assert r.get("app:s") == b"1"
    assert not r.exists("s")


def test_acquire_without_permits_set_waits(client, r):
    # Redisson testAcquireWithoutSetPermits: a count never set has no permits.
    sem = client.semaphore("unset")
    assert not sem.acquire(blocking=False)
    assert not sem.acquire(timeout=0.2)
    job = spawn(sem.acquire)
    assert wait_until(lambda: listeners(r, "redisson_sc:{unset}") == 1, 5)
    assert not job.done()
    sem.release()  # any caller may add permits by releasing
    assert job.result(10) is True
    assert sem.available_permits() == 0


def test_a_wait_on_permits_never_set_is_said_once(client, caplog):
    # issue 26 item 8: `with sem:` on a count nobody set blocks; the first wait says why.
    caplog.set_level(logging.WARNING, logger="tenure")
    name = f"never-{uuid.uuid4().hex[:8]}"  # said once per name and process
    sem = client.semaphore(name)
    assert not sem.acquire(blocking=False)  # no wait: nothing to say
    assert not sem.acquire(timeout=0.2)
    assert not sem.acquire(timeout=0.2)
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(said) == 1, said
    assert name in said[0]
    assert "never set" in said[0]
    caplog.clear()
    other = client.semaphore(f"set-{name}")
    other.set_permits(1)
    assert other.acquire()
    assert not other.acquire(timeout=0.2)  # too few, but set: no word
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_try_set_permits_only_once(client):
    sem = client.semaphore("once")
    assert sem.try_set_permits(10)
    assert not sem.try_set_permits(15)
    assert sem.available_permits() == 10


def test_zero_permits(client):
    sem = client.semaphore("zero")
    assert sem.try_set_permits(0)
    assert not sem.acquire(blocking=False)
    assert sem.available_permits() == 0


def test_add_and_reduce_permits(client):
    # Redisson testAddPermits / testReducePermits.
    sem = client.semaphore("add")
    sem.try_set_permits(10)
    sem.add_permits(5)
    assert sem.available_permits() == 15
    sem.add_permits(-20)
    assert sem.available_permits() == -5
    assert not sem.acquire(blocking=False)
    sem.add_permits(6)
    assert sem.acquire(blocking=False)


def test_set_permits_overrides(client):
    sem = client.semaphore("set")
    sem.try_set_permits(3)
    assert sem.acquire(3)
    sem.set_permits(5)
    assert sem.available_permits() == 5


def test_drain_permits(client):
    sem = client.semaphore("drain")
    assert sem.drain_permits() == 0
    sem.try_set_permits(10)
    assert sem.acquire(3)
    assert sem.drain_permits() == 7
    assert sem.available_permits() == 0


def test_release_without_acquire_adds_permits(client):
    sem = client.semaphore("rel")
    sem.release()
    sem.release(2)
    assert sem.available_permits() == 3


def test_acquire_n_waits_for_enough(client):
    # Redisson testBlockingNAcquire: a waiter for 3 permits is not served by 2.
    sem = client.semaphore("n")
    sem.try_set_permits(1)
    job = spawn(sem.acquire, 3)
    sem.release()
    assert not job.join(0.5)
    sem.release()
    assert job.result(10) is True
    assert sem.available_permits() == 0


def test_mixed_waiters_of_one_client_are_all_served(client, r):
    # One release message wakes every waiter of the client: a waiter for 1 permit is not
    # left asleep because a waiter for 3 took the wake-up.
    sem = client.semaphore("mixed")
    sem.try_set_permits(0)
    big = spawn(sem.acquire, 3)
    small = spawn(sem.acquire, 1)
    assert wait_until(lambda: asleep(client, "redisson_sc:{mixed}") == 2, 5)
    sem.release(1)
    assert small.result(5) is True
    assert not big.done()
    sem.release(3)
    assert big.result(5) is True


def test_with_block_and_timeout(client):
    sem = client.semaphore("with")
    sem.try_set_permits(1)
    with sem:
        assert sem.available_permits() == 0
        with pytest.raises(tenure.LockTimeout):
            with sem(timeout=0.1):
                pass
    assert sem.available_permits() == 1


def test_bad_arguments_raise_before_io(client, r):
    sem = client.semaphore("bad")
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
        client.semaphore("")


def test_concurrency_never_exceeds_permits(make_client):
    # Redisson testConcurrency_MultiInstance: 3 clients x 4 tasks on 2 permits.
    clients = [make_client() for _ in range(3)]
    clients[0].semaphore("conc").try_set_permits(2)
    spans: list[tuple[int, int]] = []

    def work(client: tenure.Client) -> None:
        sem = client.semaphore("conc")
        for _ in range(5):
            with sem:
                enter = time.monotonic_ns()
                sleep(0.005)
                spans.append((enter, time.monotonic_ns()))

    gather(*[lambda c=c: work(c) for c in clients for _ in range(4)])
    assert len(spans) == 60
    assert max_concurrency(spans) == 2
    assert clients[0].semaphore("conc").available_permits() == 2


def test_blocked_acquire_wakes_soon_after_release(make_client, r):
    holder = make_client().semaphore("wake")
    holder.try_set_permits(1)
    assert holder.acquire()
    client = make_client()
    waiter = client.semaphore("wake")
    got = Event()
    woke: list[float] = []

    def wait() -> None:
        assert waiter.acquire(timeout=20)
        woke.append(time.monotonic())
        got.set()

    job = spawn(wait)
    assert wait_until(lambda: listeners(r, "redisson_sc:{wake}") == 1, 5)
    assert wait_until(lambda: asleep(client, "redisson_sc:{wake}") == 1, 5)
    released = time.monotonic()
    holder.release()
    assert got.wait(5)
    job.result()
    assert woke[0] - released < 0.1, f"woke {woke[0] - released:.3f} s after the release"


def test_a_negative_count_from_another_client_wakes_waiters(client, r):
    """A Redisson client may publish a count <= 0 on the semaphore's channel (``-5``): it is
    a count like any other and wakes the waiters, never a lock's renewal message."""
    sem = client.semaphore("negative")
    job = spawn(lambda: sem.acquire(timeout=20))
    assert wait_until(lambda: listeners(r, "redisson_sc:{negative}") == 1, 5)
    assert wait_until(lambda: asleep(client, "redisson_sc:{negative}") == 1, 5)
    r.set("negative", 1)  # a permit appears without a message of its own
    r.publish("redisson_sc:{negative}", "-5")
    assert job.join(2), "the -5 did not wake the waiter"
    assert job.result() is True


def test_waiters_share_one_pubsub_connection(make_client, r):
    client = make_client()
    sems = [client.semaphore(f"share{i % 2}") for i in range(10)]
    jobs = [spawn(sem.acquire) for sem in sems]
    channels = ["redisson_sc:{share0}", "redisson_sc:{share1}"]
    assert wait_until(lambda: [listeners(r, c) for c in channels] == [1, 1], 5)
    assert len(client._runner._listener._by_node) == 1  # one pub/sub connection for both
    make_client().semaphore("share0").release(5)
    make_client().semaphore("share1").release(5)
    for job in jobs:
        assert job.result(10) is True
    assert wait_until(lambda: [listeners(r, c) for c in channels] == [0, 0], 5)


def test_a_release_of_n_permits_wakes_n_waiters_of_a_client(client, r):
    # issue 27 item 2: the message is the count now available; it wakes that many of the
    # client's waiters for one permit, not all of them (each woken one runs one attempt).
    sem = client.semaphore("count")
    sem.try_set_permits(0)
    jobs = [spawn(lambda: sem.acquire(timeout=20)) for _ in range(5)]
    assert wait_until(lambda: asleep(client, "redisson_sc:{count}") == 5, 5)
    before = script_runs(r)
    sem.release(2)
    assert wait_until(lambda: sum(job.done() for job in jobs) == 2, 5)
    assert wait_until(lambda: asleep(client, "redisson_sc:{count}") == 3, 5)
    assert script_runs(r) - before == 1 + 2  # the release, and one attempt per woken waiter
    sem.release(3)
    for job in jobs:
        assert job.result(10) is True
    assert sem.available_permits() == 0


def test_a_waiter_for_more_permits_does_not_take_a_smaller_ones_wake_up(client, r):
    # Waiters for 1, then 3, then 1 permit: a message "1" must reach a waiter for 1 even
    # when the oldest without a wake-up is the one for 3, which cannot use it.
    sem = client.semaphore("mixed3")
    sem.try_set_permits(0)
    channel = "redisson_sc:{mixed3}"
    first = spawn(lambda: sem.acquire(timeout=20))
    assert wait_until(lambda: asleep(client, channel) == 1, 5)
    big = spawn(lambda: sem.acquire(3, timeout=20))
    assert wait_until(lambda: asleep(client, channel) == 2, 5)
    last = spawn(lambda: sem.acquire(timeout=20))
    assert wait_until(lambda: asleep(client, channel) == 3, 5)
    sem.release(1)
    assert wait_until(lambda: first.done() or last.done(), 5)
    assert wait_until(lambda: asleep(client, channel) == 2, 5)
    sem.release(1)
    assert first.result(5) is True
    assert last.result(5) is True
    assert not big.done()
    sem.release(3)
    assert big.result(5) is True
