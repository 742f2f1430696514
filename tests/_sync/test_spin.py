# GENERATED from tests/_async/test_spin.py by tools/unasync.py: edit that file, not this one.
"""SpinLock: the Lock API on the Lock's wire layout, waiting on a back-off with no pub/sub."""

from __future__ import annotations

import subprocess
import sys
import time
from functools import partial

import pytest

import tenure
from support.monitor import Monitor
from support.twins import gather, sleep, spawn
from tenure import keys

EXCLUDE = """
import sys, time, redis, tenure
url, name, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
raw = redis.Redis.from_url(url)
with tenure.Client(url) as client:
    lock = client.spin_lock(name)
    for _ in range(rounds):
        with lock(timeout=30):
            value = int(raw.get("counter") or 0)
            time.sleep(0.001)
            raw.set("counter", value + 1)
"""


def test_wire_layout_is_the_lock_hash_with_owner_field_and_no_channel(client, r):
    lock = client.spin_lock("inventory")
    assert isinstance(lock, tenure.SpinLock)
    assert lock.name == "inventory"
    assert lock.acquire()
    fields = r.hgetall("inventory")
    assert list(fields.values()) == [b"1"]
    (field,) = fields
    assert field.decode().startswith(client.client_id + ":")
    assert 29_000 < r.pttl("inventory") <= 30_000  # the watchdog's lease
    lock.release()
    assert not r.exists("inventory")


def test_waiters_subscribe_to_nothing_and_release_publishes_nothing(
    make_client, server, r
):
    a, b = make_client(), make_client()
    holder, waiter = a.spin_lock("quiet"), b.spin_lock("quiet")
    assert holder.acquire()

    def wait_then_release() -> bool:
        got = waiter.acquire(timeout=10)
        waiter.release()
        return got

    monitor = Monitor(server)
    try:
        job = spawn(wait_then_release)
        sleep(0.3)
        assert r.pubsub_numsub(keys.lock_channel("quiet")) == [
            (keys.lock_channel("quiet").encode(), 0)
        ]
        holder.release()
        assert job.result()
        assert holder.acquire(blocking=False)
        assert holder.force_release()
    finally:
        lines = monitor.stop()
    commands = [c.split(" ")[0].strip('"').upper() for _, c in lines]
    assert not [c for c in commands if "SUBSCRIBE" in c or "PUBLISH" in c], commands


def test_exclusion_across_tasks_and_clients(make_client, r):
    made = [make_client() for _ in range(3)]
    inside = 0
    most = 0

    def work(c: tenure.Client) -> None:
        nonlocal inside, most
        lock = c.spin_lock("counter-lock")
        for _ in range(10):
            with lock(timeout=30):
                inside += 1
                most = max(most, inside)
                value = int(r.get("counter") or 0)
                sleep(0.002)
                r.set("counter", value + 1)
                inside -= 1

    gather(*(partial(work, c) for c in made for _ in range(2)))
    assert most == 1
    assert int(r.get("counter")) == 60


def test_exclusion_across_processes(server, r):
    procs = [
        subprocess.Popen([sys.executable, "-c", EXCLUDE, server.url, "across", "15"])
        for _ in range(3)
    ]
    for proc in procs:
        assert proc.wait(120) == 0
    assert int(r.get("counter")) == 45  # a lost update would leave less


def test_reentrancy_counts_holds(client, r):
    lock = client.spin_lock("reentrant")
    assert lock.acquire()
    assert lock.acquire(lease_time=5)
    assert lock.hold_count() == 2
    assert lock.owned()
    lock.release()
    assert lock.hold_count() == 1
    assert lock.locked()
    lock.release()
    assert not lock.locked()
    assert lock.hold_count() == 0


def test_lease_ends_the_hold_and_a_waiter_takes_it(make_client):
    a, b = make_client(), make_client()
    assert a.spin_lock("lease").acquire(lease_time=0.4)
    started = time.monotonic()
    assert b.spin_lock("lease").acquire(timeout=5)
    waited = time.monotonic() - started
    # taken once the lease ran out, at most one back-off pause (128 ms) later
    assert 0.3 <= waited < 0.4 + 0.128 + 0.5, waited
    remaining = b.spin_lock("lease").remaining_lease()
    assert remaining is not None
    assert remaining > 20


def test_release_by_non_owner_raises(make_client):
    a, b = make_client(), make_client()
    assert a.spin_lock("owned").acquire()
    with pytest.raises(tenure.NotOwnedError):
        b.spin_lock("owned").release()
    job = spawn(lambda: a.spin_lock("owned").release())  # another task, same client
    assert isinstance(job.outcome(), tenure.NotOwnedError)
    assert a.spin_lock("owned").locked()
    a.spin_lock("owned").release()


def test_lost_hold_raises_lock_lost_at_release(client, r):
    lock = client.spin_lock("taken")
    assert lock.acquire(lease_time=5)
    r.delete("taken")
    with pytest.raises(tenure.LockLostError):
        lock.release()


def test_back_off_is_bounded_by_the_timeout(make_client, server):
    a, b = make_client(), make_client()
    assert a.spin_lock("bounded").acquire()
    monitor = Monitor(server)
    started = time.monotonic()
    try:
        assert not b.spin_lock("bounded").acquire(timeout=0.6)
    finally:
        lines = monitor.stop()
    waited = time.monotonic() - started
    assert 0.6 <= waited < 0.6 + 0.3, waited  # the last pause is cut to the deadline
    attempts = [c for kind, c in lines if kind != "lua" and c.upper().startswith("EVAL")]
    # 1, 2, 4 ... 128 ms pauses: about 11 attempts in 0.6 s, never a busy loop
    assert 5 <= len(attempts) <= 16, len(attempts)
    assert not b.spin_lock("bounded").acquire(blocking=False)


def test_waiter_takes_a_freed_lock_within_one_longest_pause(make_client):
    a, b = make_client(), make_client()
    holder, waiter = a.spin_lock("freed"), b.spin_lock("freed")
    assert holder.acquire()

    def wait_then_release() -> float:
        assert waiter.acquire(timeout=10)
        taken = time.monotonic()
        waiter.release()
        return taken

    job = spawn(wait_then_release)
    sleep(1.0)  # the waiter's pauses reached their 128 ms cap
    freed = time.monotonic()
    holder.release()
    assert job.result() - freed < 0.128 + 0.25


def test_watchdog_keeps_it_past_three_leases_without_telling_a_channel(make_client, r):
    c = make_client(watchdog_timeout=0.6)
    lock = c.spin_lock("renewed")
    assert lock.acquire()
    sleep(2.0)
    assert lock.owned()
    assert not lock.lost
    lock.release()


def test_redisson_holder_excludes_and_force_release(client, r):
    r.hset("java", "6f1c1e7a-0d2c-4a43-9d6b-0a8f3f1e2b3c:1", 1)
    r.pexpire("java", 30_000)
    lock = client.spin_lock("java")
    assert not lock.acquire(timeout=0.2)
    assert lock.force_release()
    assert not lock.force_release()
    assert lock.acquire(blocking=False)
    lock.release()


def test_kind_is_refused_like_a_lock(client, r):
    r.set("wrong", "x")
    with pytest.raises(tenure.LockKindError):
        client.spin_lock("wrong").acquire(blocking=False)
