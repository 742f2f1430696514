# SpinLock (asyncio source of tests/_sync/test_spin.py).
"""SpinLock: the Lock API on the Lock's wire layout, waiting on a back-off with no pub/sub."""

from __future__ import annotations

import subprocess
import sys
import time
from functools import partial

import pytest

import tenure
from support.monitor import Monitor
from support.twins import async_gather, async_sleep, async_spawn
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


async def test_wire_layout_is_the_lock_hash_with_owner_field_and_no_channel(async_client, r):
    lock = async_client.spin_lock("inventory")
    assert isinstance(lock, tenure.AsyncSpinLock)
    assert lock.name == "inventory"
    assert await lock.acquire()
    fields = r.hgetall("inventory")
    assert list(fields.values()) == [b"1"]
    (field,) = fields
    assert field.decode().startswith(async_client.client_id + ":")
    assert 29_000 < r.pttl("inventory") <= 30_000  # the watchdog's lease
    await lock.release()
    assert not r.exists("inventory")


async def test_waiters_subscribe_to_nothing_and_release_publishes_nothing(
    async_make_client, server, r
):
    a, b = async_make_client(), async_make_client()
    holder, waiter = a.spin_lock("quiet"), b.spin_lock("quiet")
    assert await holder.acquire()

    async def wait_then_release() -> bool:
        got = await waiter.acquire(timeout=10)
        await waiter.release()
        return got

    monitor = Monitor(server)
    try:
        job = async_spawn(wait_then_release)
        await async_sleep(0.3)
        assert r.pubsub_numsub(keys.lock_channel("quiet")) == [
            (keys.lock_channel("quiet").encode(), 0)
        ]
        await holder.release()
        assert await job.result()
        assert await holder.acquire(blocking=False)
        assert await holder.force_release()
    finally:
        lines = monitor.stop()
    commands = [c.split(" ")[0].strip('"').upper() for _, c in lines]
    assert not [c for c in commands if "SUBSCRIBE" in c or "PUBLISH" in c], commands


async def test_exclusion_across_tasks_and_clients(async_make_client, r):
    made = [async_make_client() for _ in range(3)]
    inside = 0
    most = 0

    async def work(c: tenure.AsyncClient) -> None:
        nonlocal inside, most
        lock = c.spin_lock("counter-lock")
        for _ in range(10):
            async with lock(timeout=30):
                inside += 1
                most = max(most, inside)
                value = int(r.get("counter") or 0)
                await async_sleep(0.002)
                r.set("counter", value + 1)
                inside -= 1

    await async_gather(*(partial(work, c) for c in made for _ in range(2)))
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


async def test_reentrancy_counts_holds(async_client, r):
    lock = async_client.spin_lock("reentrant")
    assert await lock.acquire()
    assert await lock.acquire(lease_time=5)
    assert await lock.hold_count() == 2
    assert await lock.owned()
    await lock.release()
    assert await lock.hold_count() == 1
    assert await lock.locked()
    await lock.release()
    assert not await lock.locked()
    assert await lock.hold_count() == 0


async def test_lease_ends_the_hold_and_a_waiter_takes_it(async_make_client):
    a, b = async_make_client(), async_make_client()
    assert await a.spin_lock("lease").acquire(lease_time=0.4)
    started = time.monotonic()
    assert await b.spin_lock("lease").acquire(timeout=5)
    waited = time.monotonic() - started
    # taken once the lease ran out, at most one back-off pause (128 ms) later
    assert 0.3 <= waited < 0.4 + 0.128 + 0.5, waited
    remaining = await b.spin_lock("lease").remaining_lease()
    assert remaining is not None
    assert remaining > 20


async def test_release_by_non_owner_raises(async_make_client):
    a, b = async_make_client(), async_make_client()
    assert await a.spin_lock("owned").acquire()
    with pytest.raises(tenure.NotOwnedError):
        await b.spin_lock("owned").release()
    job = async_spawn(lambda: a.spin_lock("owned").release())  # another task, same client
    assert isinstance(await job.outcome(), tenure.NotOwnedError)
    assert await a.spin_lock("owned").locked()
    await a.spin_lock("owned").release()


async def test_lost_hold_raises_lock_lost_at_release(async_client, r):
    lock = async_client.spin_lock("taken")
    assert await lock.acquire(lease_time=5)
    r.delete("taken")
    with pytest.raises(tenure.LockLostError):
        await lock.release()


async def test_back_off_is_bounded_by_the_timeout(async_make_client, server):
    a, b = async_make_client(), async_make_client()
    assert await a.spin_lock("bounded").acquire()
    monitor = Monitor(server)
    started = time.monotonic()
    try:
        assert not await b.spin_lock("bounded").acquire(timeout=0.6)
    finally:
        lines = monitor.stop()
    waited = time.monotonic() - started
    assert 0.6 <= waited < 0.6 + 0.3, waited  # the last pause is cut to the deadline
    attempts = [c for kind, c in lines if kind != "lua" and c.upper().startswith("EVAL")]
    # 1, 2, 4 ... 128 ms pauses: about 11 attempts in 0.6 s, never a busy loop
    assert 5 <= len(attempts) <= 16, len(attempts)
    assert not await b.spin_lock("bounded").acquire(blocking=False)


async def test_waiter_takes_a_freed_lock_within_one_longest_pause(async_make_client):
    a, b = async_make_client(), async_make_client()
    holder, waiter = a.spin_lock("freed"), b.spin_lock("freed")
    assert await holder.acquire()

    async def wait_then_release() -> float:
        assert await waiter.acquire(timeout=10)
        taken = time.monotonic()
        await waiter.release()
        return taken

    job = async_spawn(wait_then_release)
    await async_sleep(1.0)  # the waiter's pauses reached their 128 ms cap
    freed = time.monotonic()
    await holder.release()
    assert await job.result() - freed < 0.128 + 0.25


async def test_watchdog_keeps_it_past_three_leases_without_telling_a_channel(async_make_client, r):
    c = async_make_client(watchdog_timeout=0.6)
    lock = c.spin_lock("renewed")
    assert await lock.acquire()
    await async_sleep(2.0)
    assert await lock.owned()
    assert not lock.lost
    await lock.release()


async def test_redisson_holder_excludes_and_force_release(async_client, r):
    r.hset("java", "6f1c1e7a-0d2c-4a43-9d6b-0a8f3f1e2b3c:1", 1)
    r.pexpire("java", 30_000)
    lock = async_client.spin_lock("java")
    assert not await lock.acquire(timeout=0.2)
    assert await lock.force_release()
    assert not await lock.force_release()
    assert await lock.acquire(blocking=False)
    await lock.release()


async def test_kind_is_refused_like_a_lock(async_client, r):
    r.set("wrong", "x")
    with pytest.raises(tenure.LockKindError):
        await async_client.spin_lock("wrong").acquire(blocking=False)
