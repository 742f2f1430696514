# Waiting rules seen from outside (asyncio source of tests/_sync/test_waiting.py).
"""Waiting on real servers: wake-ups for shared holds, reconnects, interrupts. The rules
themselves are tested without a server in tests/core/test_listening.py."""

from __future__ import annotations

import time

import pytest
import redis

from support.twins import async_gather, async_spawn, async_wait_until
from tenure import keys


async def test_readers_waiting_on_a_write_lease_all_hold_when_it_runs_out(
    async_make_client, r: redis.Redis
) -> None:
    # Two readers of one client wait behind a write hold with a lease: when the lease
    # runs out (no unlock message comes), the first reader re-checks and takes a read
    # hold, and must pass the wake-up on: the second one can share the lock too.
    writer_client = reader_client = async_make_client()
    write = writer_client.read_write_lock("ledger").write_lock()
    assert await write.acquire(lease_time=2)
    read = reader_client.read_write_lock("ledger").read_lock()
    started = time.monotonic()

    async def reader() -> float:
        assert await read.acquire()
        return time.monotonic() - started

    jobs = [async_spawn(reader), async_spawn(reader)]
    assert await async_wait_until(
        lambda: int(r.pubsub_numsub(keys.rw_channel("ledger"))[0][1]) >= 1
    )
    times = [await job.result(12) for job in jobs]
    assert max(times) < 2 + 1.5, times  # within about a second of the lease end
    # The first passes the wake-up on at once (before: the second slept on until its
    # socket read timed out, 0.5 s later).
    assert max(times) - min(times) < 0.3, times
    assert r.hget("ledger", "mode") == b"read"


async def test_permits_freed_by_a_lease_end_reach_every_waiter_they_can_serve(
    async_make_client, r: redis.Redis
) -> None:
    # The same rule for permits: a holder's two permits come back when their lease runs out
    # (no release message); two waiters of one client each want one.
    holder, waiter = async_make_client(), async_make_client()
    sem = holder.permit_expirable_semaphore("pool")
    assert await sem.try_set_permits(2)
    assert await sem.acquire(lease_time=2)
    assert await sem.acquire(lease_time=2)
    mine = waiter.permit_expirable_semaphore("pool")
    started = time.monotonic()

    async def one() -> float:
        assert await mine.acquire()
        return time.monotonic() - started

    times = await async_gather(one, one, timeout=12)
    assert max(times) < 2 + 1.5, times


def evalsha_calls(r: redis.Redis) -> int:
    return int(r.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))


async def test_an_unlock_right_after_a_pubsub_reconnect_wakes_the_waiter(
    async_make_client, r: redis.Redis
) -> None:
    # The waiter's pub/sub connection is killed; it re-checks the lock once the new
    # subscription is confirmed, never before: an unlock published between an early
    # re-check and the new SUBSCRIBE would reach nobody, and the waiter would sleep to
    # the holder's lease end (10 s here).
    holder = async_make_client().lock("reconnect")
    assert await holder.acquire(lease_time=10)
    waiter = async_make_client().lock("reconnect")
    job = async_spawn(lambda: waiter.acquire(timeout=15))
    channel = keys.lock_channel("reconnect")
    assert await async_wait_until(lambda: r.pubsub_numsub(channel)[0][1] == 1)
    before = evalsha_calls(r)
    assert r.client_kill_filter(_type="pubsub") >= 1
    # The moment the waiter re-checks (its attempt reaches the server), the holder lets go.
    assert await async_wait_until(lambda: evalsha_calls(r) > before, 5, 0.001)
    await holder.release()
    released = time.monotonic()
    assert await job.result(15) is True
    assert time.monotonic() - released < 2.0, "the unlock after the reconnect was missed"


async def shorter_lease_taken(
    async_make_client, r: redis.Redis, name: str, later: bool, own: bool = False
) -> float:
    """A waiter saw a 6 s lease; the unlock goes to another client alone (registered first
    in the wake queue; with ``own``, the releaser's own client), which takes the lock with a
    0.5 s lease and never releases it. With ``later``, a second waiter of the first
    waiter's client then starts (and sees the short lease). Seconds from the short grant to
    the first hold of the waiters' client."""
    queue = keys.lock_wake_queue(name)
    holders = async_make_client()
    holder = holders.lock(name)
    assert await holder.acquire(lease_time=6)
    granted: list[float] = []

    async def short_holder() -> None:
        short = (holders if own else async_make_client()).lock(name)
        assert await short.acquire(timeout=20, lease_time=0.5)
        granted.append(time.monotonic())

    first = async_spawn(short_holder)
    assert await async_wait_until(lambda: r.zcard(queue) == 1)
    client = async_make_client()
    held: list[float] = []

    async def waiter() -> None:
        lock = client.lock(name)
        assert await lock.acquire(timeout=20)
        held.append(time.monotonic())
        await lock.release()

    jobs = [async_spawn(waiter)]
    assert await async_wait_until(lambda: r.zcard(queue) == 2)
    await holder.release()  # goes to the short holder's client alone (-1 with ``own``)
    await first.result(5)
    if later:
        assert 0 < r.pttl(name) <= 500
        jobs.append(async_spawn(waiter))  # refused: it sees the 0.5 s lease
    for job in jobs:
        await job.result(20)
    return held[0] - granted[0]


async def test_a_shorter_lease_seen_by_a_later_waiter_moves_the_shared_recheck(
    async_make_client, r: redis.Redis
) -> None:
    # The waiters of one client share the lease-end re-check: the oldest makes it. When a
    # later one sees a shorter lease, the re-check must come at its end, not at the 6 s one
    # (the lock would stay free, every waiter asleep). Within about half a second of the
    # short lease's end (before: at the 6 s lease's end, about 5.5 s after it).
    waited = await shorter_lease_taken(async_make_client, r, "shorter", later=True)
    assert waited < 0.5 + 1.0, waited


async def test_a_shorter_lease_taken_after_a_targeted_unlock_reaches_the_other_clients(
    async_make_client, r: redis.Redis
) -> None:
    # The same with one waiter: its client hears no unlock and saw no shorter lease; the
    # releaser's back-up look tells it the new lease end.
    waited = await shorter_lease_taken(async_make_client, r, "shorter-elsewhere", later=False)
    assert waited < 0.5 + 1.0, waited


async def test_a_shorter_lease_taken_in_the_releasers_own_client_reaches_the_others(
    async_make_client, r: redis.Redis
) -> None:
    # The same when the unlock goes to the releaser's own client alone (another waiter of
    # it took the lock): no back-up look was made, so the other clients never heard the
    # short lease end (found by a long mixed run of the simulator, seed 40, where the
    # release was the undo of a grant whose reply was lost).
    waited = await shorter_lease_taken(async_make_client, r, "shorter-own", later=False, own=True)
    assert waited < 0.5 + 1.0, waited


async def test_a_shorter_write_lease_taken_after_a_targeted_unlock_reaches_the_rw_waiters(
    async_make_client, r: redis.Redis
) -> None:
    # Found by the simulator (a mixed run, seed 165): a ReadWriteLock's waiters re-check
    # each at its own end. The unlock goes to another client alone, which takes the write
    # lock with a 0.5 s lease and never releases it; the releaser's back-up look tells the
    # lock's channel that end (`-<ms>`). The waiter that saw the 6 s lease must re-check
    # there (before: it slept on to the 6 s end, the lock free for 5.5 s).
    name = "rw-shorter-elsewhere"
    queue = keys.lock_wake_queue(name)
    holder = async_make_client().read_write_lock(name).write_lock()
    assert await holder.acquire(lease_time=6)
    granted: list[float] = []

    async def short_holder() -> None:
        lock = async_make_client().read_write_lock(name).write_lock()
        assert await lock.acquire(timeout=20, lease_time=0.5)
        granted.append(time.monotonic())

    first = async_spawn(short_holder)
    assert await async_wait_until(lambda: r.zcard(queue) == 1)
    held: list[float] = []

    async def waiter() -> None:
        lock = async_make_client().read_write_lock(name).write_lock()
        assert await lock.acquire(timeout=20)
        held.append(time.monotonic())
        await lock.release()

    job = async_spawn(waiter)
    assert await async_wait_until(lambda: r.zcard(queue) == 2)
    await holder.release()  # goes to the short holder's client alone
    await first.result(5)
    await job.result(20)
    assert held[0] - granted[0] < 0.5 + 1.0, held[0] - granted[0]


@pytest.mark.parametrize("shortened_by", ["re-entry", "release"])
async def test_a_holder_shortening_its_lease_tells_the_waiters(
    async_make_client, r: redis.Redis, shortened_by: str
) -> None:
    # A waiter of another client saw a 6 s lease; the holder then moves the lock's expiry
    # to 0.5 s (a re-entry with a shorter lease_time, or the release of a newer, longer
    # hold above an older short one) and goes silent: the waiter must re-check at the new
    # end, not sleep to the old one.
    name = f"shortened-{shortened_by}"
    holder = async_make_client().lock(name)
    if shortened_by == "release":
        assert await holder.acquire(lease_time=0.5)
    assert await holder.acquire(lease_time=6)
    held: list[float] = []

    async def waiter() -> None:
        lock = async_make_client().lock(name)
        assert await lock.acquire(timeout=20)
        held.append(time.monotonic())
        await lock.release()

    job = async_spawn(waiter)
    assert await async_wait_until(lambda: r.zcard(keys.lock_wake_queue(name)) == 1)
    if shortened_by == "release":
        await holder.release()
    else:
        assert await holder.acquire(lease_time=0.5)
    shortened = time.monotonic()
    assert 0 < r.pttl(name) <= 500
    await job.result(20)
    # Within about half a second of the new end (before: about 5.5 s after it).
    assert held[0] - shortened < 0.5 + 1.0, held[0] - shortened
