# GENERATED from tests/_async/test_lock.py by tools/unasync.py: edit that file, not this one.
"""Lock semantics on real servers: exclusion, reentrancy, ownership, leases, waiting.

The caller is a task here and a thread in the generated sync twin (tests/_sync)."""

from __future__ import annotations

import math
import time
from functools import partial

import pytest

import tenure
from support.twins import (
    Event,
    Redis,
    gather,
    sleep,
    spawn,
    wait_until,
)
from support.wire import shared_channels
from tenure import keys


def test_wire_layout_is_redissons(client, r):
    lock = client.lock("orders:42")
    lock.acquire()
    assert r.type("orders:42") == b"hash"
    fields = r.hgetall("orders:42")
    [(owner, count)] = fields.items()
    uuid, number = owner.decode().rsplit(":", 1)
    assert uuid == client.client_id
    assert len(uuid) == 36
    assert number.isdigit()
    assert count == b"1"
    assert 29_000 < r.pttl("orders:42") <= 30_000
    pubsub = r.pubsub()
    pubsub.subscribe("redisson_lock__channel:{orders:42}")
    assert pubsub.get_message(timeout=1)["type"] == "subscribe"
    lock.release()
    message = pubsub.get_message(timeout=2)
    assert message["data"] == b"0"
    pubsub.close()


def test_name_prefix_is_prepended_on_the_wire(make_client, r):
    lock = make_client(name_prefix="app1:").lock("job")
    lock.acquire()
    assert lock.name == "job"
    assert r.exists("app1:job")
    assert not r.exists("job")
    lock.release()


def test_reentrancy_hold_counts(client):
    lock = client.lock("re")
    counts = [lock.hold_count()]
    lock.acquire()
    counts.append(lock.hold_count())
    lock.release()
    counts.append(lock.hold_count())
    lock.acquire()
    lock.acquire()
    counts.append(lock.hold_count())
    lock.release()
    counts.append(lock.hold_count())
    lock.release()
    counts.append(lock.hold_count())
    assert counts == [0, 1, 0, 2, 1, 0]
    assert not lock.locked()


def test_other_caller_cannot_release_and_does_not_own(client):
    lock = client.lock("mine")
    lock.acquire()

    def other() -> dict[str, object]:
        seen: dict[str, object] = {"owned": lock.owned(), "locked": lock.locked()}
        try:
            lock.release()
        except tenure.NotOwnedError as error:
            seen["error"] = error
        return seen

    seen = spawn(other).result()
    assert seen["owned"] is False
    assert seen["locked"] is True
    assert type(seen["error"]) is tenure.NotOwnedError
    assert lock.owned()
    lock.release()


def test_reentrancy_and_other_caller_cannot_release(client):
    lock = client.lock("are")
    seen: list[object] = [lock.hold_count()]
    lock.acquire()
    lock.acquire()
    seen.append(lock.hold_count())

    def other() -> object:
        try:
            lock.release()
        except tenure.NotOwnedError as error:
            return (lock.owned(), type(error))
        return "released"

    seen.append(spawn(other).result())
    lock.release()
    seen.append(lock.hold_count())
    lock.release()
    seen.append(lock.locked())
    assert seen == [0, 2, (False, tenure.NotOwnedError), 1, False]


def test_callers_sharing_one_lock_object_exclude_each_other(client):
    lock = client.lock("tasks")
    inside = 0
    overlaps = 0

    def work() -> None:
        nonlocal inside, overlaps
        for _ in range(20):
            with lock:
                inside += 1
                overlaps += inside > 1
                value = int(client.redis.get("n") or 0)
                sleep(0)
                client.redis.set("n", value + 1)
                inside -= 1

    gather(*[work] * 5)
    assert (int(client.redis.get("n")), overlaps) == (100, 0)


def test_release_without_hold_raises_not_owned(client):
    with pytest.raises(tenure.NotOwnedError) as info:
        client.lock("never").release()
    assert not isinstance(info.value, tenure.LockLostError)


def test_other_client_is_another_owner(make_client):
    a, b = make_client().lock("x"), make_client().lock("x")
    assert a.acquire()
    assert not b.acquire(blocking=False)
    assert not b.owned()
    with pytest.raises(tenure.NotOwnedError):
        b.release()
    a.release()
    assert b.acquire(timeout=0)
    b.release()


def test_acquire_timeout_returns_false_after_the_wait(make_client):
    make_client().lock("held").acquire()
    lock = make_client().lock("held")
    start = time.monotonic()
    assert lock.acquire(timeout=3) is False
    assert 2.9 <= time.monotonic() - start < 4.5
    start = time.monotonic()
    assert lock.acquire(blocking=False) is False
    assert time.monotonic() - start < 1


def test_with_timeout_raises_lock_timeout_and_never_enters(make_client):
    make_client().lock("held").acquire()
    entered = False
    with pytest.raises(tenure.LockTimeout):
        with make_client().lock("held")(timeout=0.2):
            entered = True
    assert not entered


def test_lease_expiry_hands_over_and_old_release_raises_lost(make_client):
    first, second = make_client().lock("lease"), make_client().lock("lease")
    first.acquire(lease_time=2)
    start = time.monotonic()
    assert second.acquire(timeout=10)
    waited = time.monotonic() - start
    assert 1.8 <= waited < 2.5
    with pytest.raises(tenure.LockLostError):
        first.release()
    assert first.lost
    with pytest.raises(tenure.NotOwnedError):  # reported once; now simply not held
        first.release()
    assert second.owned()
    second.release()


def test_timeout_and_short_lease_expiry(make_client):
    first, second = make_client().lock("alease"), make_client().lock("alease")
    first.acquire(lease_time=1)
    start = time.monotonic()
    assert second.acquire(timeout=0.3) is False
    assert 0.25 <= time.monotonic() - start < 1.0
    assert second.acquire(timeout=5)
    assert time.monotonic() - start < 1.6
    with pytest.raises(tenure.LockLostError):
        first.release()
    with pytest.raises(tenure.LockTimeout):
        with first(timeout=0.1):
            pytest.fail("entered without the lock")
    second.release()


def test_remaining_lease_after_partial_release(client):
    lock = client.lock("lease3")
    assert lock.remaining_lease() is None
    for _ in range(3):
        lock.acquire(lease_time=10)
    lock.release()
    lock.release()
    assert 9 <= lock.remaining_lease() <= 10
    assert lock.hold_count() == 1
    lock.release()
    assert lock.remaining_lease() is None


def test_remaining_lease_is_inf_without_expiry(client, r):
    r.hset("forever", "someone:1", 1)
    assert client.lock("forever").remaining_lease() == math.inf


def test_force_release_wakes_waiters(make_client, r):
    holder = make_client().lock("forced")
    holder.acquire()
    waiter = make_client().lock("forced")
    done = Event()

    def wait() -> None:
        if waiter.acquire(timeout=20):
            done.set()
            waiter.release()

    job = spawn(wait)
    # the waiter subscribed: the wake-up must come from the message
    assert wait_until(
        lambda: shared_channels(r) == [b"redisson_lock__channel:{forced}"]
    )
    assert make_client().lock("forced").force_release() is True
    assert done.wait(2), "force_release did not wake the waiter"
    job.result()
    assert make_client().lock("forced").force_release() is False


def test_waiter_is_woken_by_release_not_by_lease(make_client, r):
    holder = make_client().lock("handoff")
    holder.acquire()  # 30 s watchdog lease: only the unlock message can wake the waiter soon
    waiter = make_client().lock("handoff")
    got = Event()

    def wait() -> None:
        if waiter.acquire(timeout=20):
            got.set()

    job = spawn(wait)
    assert wait_until(
        lambda: shared_channels(r) == [b"redisson_lock__channel:{handoff}"]
    )
    holder.release()
    assert got.wait(2)
    job.result()


def first_after_release(r, holder, waiter, subscribers: int) -> str:
    """Who takes the lock first ("holder" or "waiter") when ``holder`` releases it once
    ``waiter`` (another client's) waits on it and the lock's channel has ``subscribers``,
    then at once asks for it again."""
    order: list[str] = []

    def wait() -> None:
        assert waiter.acquire(timeout=10)
        order.append("waiter")
        waiter.release()

    job = spawn(wait)
    channel = keys.lock_channel(holder.name)
    assert wait_until(lambda: r.pubsub_numsub(channel)[0][1] == subscribers)
    holder.release()
    assert holder.acquire(timeout=10)
    order.append("holder")
    holder.release()
    job.result()
    return order[0]


def test_a_releaser_with_no_subscription_lets_the_waiter_it_woke_in_first(
    make_client, r
):
    """Issue 14: no barging. The release script counts the subscribers its unlock reached;
    the releaser takes away its own subscription only if it has one. Before, it guessed that
    one of them was its own: a holder that had never waited (no subscription) and woke one
    other client's waiter took the lock straight back, ahead of that waiter."""
    holder_client, waiter_client = make_client(), make_client()
    rounds, waiter_first = 10, 0
    for i in range(rounds):  # a new name each round: the holder has never waited on it
        name = f"polite{i}"
        holder, waiter = holder_client.lock(name), waiter_client.lock(name)
        holder.acquire()
        waiter_first += first_after_release(r, holder, waiter, subscribers=1) == "waiter"
    assert waiter_first >= rounds - 2, f"the waiter went first in {waiter_first} of {rounds}"


def test_a_releaser_whose_subscription_lingers_lets_the_waiter_it_woke_in_first(
    make_client, r
):
    """Issue 14: no barging, when the releaser waited on the lock moments before (its
    subscription lingers, so its own unlock reaches its own socket). Its next acquire must
    not take that unlock for a wake-up: the waiters read the socket themselves, and nobody
    read it while the releaser held the lock, so the release reads what came at once. Before:
    the releaser's next wait read its own unlock and took the lock back ahead of the waiter."""
    first_client, holder_client, waiter_client = (make_client() for _ in range(3))
    rounds, waiter_first = 10, 0
    for i in range(rounds):
        name = f"lingering{i}"
        first, holder, waiter = (c.lock(name) for c in (first_client, holder_client, waiter_client))
        channel = keys.lock_channel(name)
        first.acquire()

        def free(first=first, channel=channel) -> None:
            assert wait_until(lambda: r.pubsub_numsub(channel)[0][1] == 1)
            first.force_release()

        freeing = spawn(free)
        assert holder.acquire(timeout=10)  # it waited: its subscription lingers
        freeing.result()
        waiter_first += first_after_release(r, holder, waiter, subscribers=2) == "waiter"
    assert waiter_first >= rounds - 2, f"the waiter went first in {waiter_first} of {rounds}"


def test_no_subscription_left_after_contention(make_client, r):
    client = make_client()
    names = [f"leak{i}" for i in range(5)]
    locks = [client.lock(n) for n in names]
    other = make_client()
    total = [0]

    def work(i: int) -> None:
        own = other if i % 2 else client
        lock = own.lock(names[i % 5])
        for _ in range(100):
            with lock:
                total[0] += 1

    gather(*(partial(work, i) for i in range(10)))
    assert total[0] == 1000
    # UNSUBSCRIBE is sent without waiting for its reply
    wait_until(lambda: not r.pubsub_channels(), 5, 0.05)
    assert r.pubsub_channels() == []
    assert not any([lock.locked() for lock in locks])


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"timeout": -2}, ValueError),
        ({"timeout": float("nan")}, ValueError),
        ({"timeout": "1"}, TypeError),
        ({"lease_time": 0}, ValueError),
        ({"lease_time": -1}, ValueError),
        ({"lease_time": float("inf")}, ValueError),
        ({"lease_time": float("nan")}, ValueError),
        ({"blocking": False, "timeout": 5}, ValueError),
        ({"blocking": "yes"}, TypeError),
    ],
)
def test_bad_acquire_arguments_raise_before_io(kwargs, error):
    client = tenure.Client("redis://127.0.0.1:1/0")  # nothing listens: any I/O would fail
    with pytest.raises(error) as info:
        client.lock("x").acquire(**kwargs)
    assert next(iter(kwargs)) in str(info.value)


@pytest.mark.parametrize("name", ["", 5, None, b"x"])
def test_bad_names_raise(name):
    client = tenure.Client("redis://127.0.0.1:1/0")
    with pytest.raises((ValueError, TypeError), match="name"):
        client.lock(name)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"watchdog_timeout": 0},
        {"watchdog_timeout": float("nan")},
        {"name_prefix": 1},
        {"wait_for_replicas": -1},
        {"socket_timeout": -1},
    ],
)
def test_bad_client_options_raise(kwargs):
    with pytest.raises((ValueError, TypeError), match=next(iter(kwargs))):
        tenure.Client("redis://127.0.0.1:1/0", **kwargs)


def test_client_from_redis_instance(server, r):
    raw = Redis(port=server.port)
    with tenure.Client(raw) as client, client.lock("shared") as lock:
        assert lock.owned()
    assert raw.ping()  # a passed-in client is not closed by tenure
    raw.close()
    with pytest.raises(TypeError):
        tenure.Client(42)  # type: ignore[arg-type]
