"""Lock semantics on real servers: exclusion, reentrancy, ownership, leases, waiting."""

from __future__ import annotations

import itertools
import math
import multiprocessing
import threading
import time

import pytest
import redis

import tenure
from workers import count_under_lock, fork_and_release

SPAWN = multiprocessing.get_context("spawn")


def test_exclusion_across_processes_loses_no_update(server, r):
    with SPAWN.Pool(4) as pool:
        results = pool.starmap(count_under_lock, [(server.url, "counter-lock", 50, 2)] * 4)
    assert int(r.get("counter")) == 4 * 2 * 50
    spans = sorted(s for spans in results for s in spans)
    overlaps = sum(1 for a, b in itertools.pairwise(spans) if b[0] < a[1])
    assert overlaps == 0


def test_wire_layout_is_redissons(client, r):
    lock = client.lock("orders:42")
    lock.acquire()
    assert r.type("orders:42") == b"hash"
    fields = r.hgetall("orders:42")
    [(owner, count)] = fields.items()
    uuid, number = owner.decode().rsplit(":", 1)
    assert uuid == client.client_id and len(uuid) == 36 and number.isdigit()
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
    assert r.exists("app1:job") and not r.exists("job")
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


def test_other_thread_cannot_release_and_does_not_own(client):
    lock = client.lock("mine")
    lock.acquire()
    seen: dict[str, object] = {}

    def other() -> None:
        seen["owned"] = lock.owned()
        seen["locked"] = lock.locked()
        try:
            lock.release()
        except tenure.NotOwnedError as error:
            seen["error"] = error

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen["owned"] is False and seen["locked"] is True
    assert type(seen["error"]) is tenure.NotOwnedError
    assert lock.owned()
    lock.release()


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
    with pytest.raises(tenure.LockTimeout), make_client().lock("held")(timeout=0.2):
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


def test_force_release_wakes_waiters(make_client):
    holder = make_client().lock("forced")
    holder.acquire()
    waiter = make_client().lock("forced")
    done = threading.Event()
    started = threading.Event()

    def wait() -> None:
        started.set()
        if waiter.acquire(timeout=20):
            done.set()
            waiter.release()

    t = threading.Thread(target=wait)
    t.start()
    started.wait()
    time.sleep(0.2)  # let the waiter subscribe; the wake-up must come from the message
    assert make_client().lock("forced").force_release() is True
    assert done.wait(2), "force_release did not wake the waiter"
    t.join()
    assert make_client().lock("forced").force_release() is False


def test_waiter_is_woken_by_release_not_by_lease(make_client):
    holder = make_client().lock("handoff")
    holder.acquire()  # 30 s watchdog lease: only the unlock message can wake the waiter soon
    waiter = make_client().lock("handoff")
    got = threading.Event()
    t = threading.Thread(target=lambda: waiter.acquire(timeout=20) and got.set())
    t.start()
    time.sleep(0.3)
    holder.release()
    assert got.wait(2)
    t.join()


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

    threads = [threading.Thread(target=work, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert total[0] == 1000
    deadline = time.monotonic() + 5
    while r.pubsub_channels() and time.monotonic() < deadline:
        time.sleep(0.05)  # UNSUBSCRIBE is sent without waiting for its reply
    assert r.pubsub_channels() == []
    assert not any(lock.locked() for lock in locks)


def test_fork_child_owns_nothing(server, r):
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        outcome = pool.apply(fork_and_release, (server.url, "forked"))
    assert outcome == "not-owned,NotOwnedError,parent-owned"


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
    raw = redis.Redis(port=server.port)
    with tenure.Client(raw) as client, client.lock("shared") as lock:
        assert lock.owned()
    assert raw.ping()  # a passed-in client is not closed by tenure
    with pytest.raises(TypeError):
        tenure.Client(42)  # type: ignore[arg-type]
