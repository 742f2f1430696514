# FairLock: FIFO order, queue cleanup, deadlines (asyncio source of tests/_sync/test_fair.py).
"""FairLock: FIFO order, queue cleanup, deadlines. Several processes: tests/process."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import pytest
import redis

import tenure
from support.monitor import Monitor
from support.servers import Server
from support.twins import async_gather, async_sleep, async_spawn, async_stamped, async_wait_until
from support.wire import deadlines, queue_of, server_ms, text
from tenure import keys
from tenure.core.fair import FIRST_LOOK, FairLockCore

WAIT = 300_000
"""Redisson's threadWaitTime (ms): what each place in a fair queue adds to a score."""


def alive_key(name: str) -> str:
    """tenure's HASH of a fair lock's queued tenure waiters (owner -> alive-until ms)."""
    return keys.prefix_name("tenure_lock_waiters", name)


@pytest.fixture
def own_server(server: Server):
    """A server of the session's kind that this test may pause (SIGSTOP)."""
    s = Server(server.binary).start()
    yield s
    s.stop()


async def test_reentrant_hold_count_and_wire_layout(
    async_client: tenure.AsyncClient, r: redis.Redis
) -> None:
    lock = async_client.fair_lock("orders:42")
    assert isinstance(lock, tenure.AsyncFairLock)
    assert lock.name == "orders:42"
    assert await lock.acquire()
    assert await lock.acquire(lease_time=20)
    assert await lock.owned()
    assert await lock.locked()
    assert await lock.hold_count() == 2
    fields = r.hgetall("orders:42")
    assert len(fields) == 1
    ((owner, count),) = fields.items()
    assert text(owner).startswith(async_client.client_id + ":")
    assert count == b"2"
    assert 19 < await lock.remaining_lease() <= 20  # type: ignore[operator]
    await lock.release()
    assert await lock.hold_count() == 1
    assert await lock.remaining_lease() <= async_client.watchdog_timeout  # type: ignore[operator]
    await lock.release()
    assert not await lock.locked()
    assert await lock.remaining_lease() is None
    with pytest.raises(tenure.NotOwnedError):
        await lock.release()
    assert r.keys("*") == []


async def test_non_blocking_attempt_never_joins_queue(
    async_client: tenure.AsyncClient, r: redis.Redis
) -> None:
    lock = async_client.fair_lock("nb")
    assert await lock.acquire(lease_time=10)
    for kwargs in ({"blocking": False}, {"timeout": 0}):
        assert await async_spawn(lambda kw=kwargs: lock.acquire(**kw)).result() is False
    assert r.exists(keys.fair_queue_key("nb"), keys.fair_timeout_key("nb")) == 0
    # and a free lock with a waiter queued is not taken by a one-shot attempt either
    waiter = async_spawn(lambda: lock.acquire(timeout=10, lease_time=10))
    assert await async_wait_until(lambda: len(queue_of(r, "nb")) == 1)
    await lock.release()
    assert await waiter.result() is True
    assert await async_spawn(lambda: lock.acquire(blocking=False)).result() is False


async def test_timed_out_waiter_leaves_queue(
    async_client: tenure.AsyncClient, r: redis.Redis
) -> None:
    lock = async_client.fair_lock("t")
    assert await lock.acquire(lease_time=10)
    job = async_spawn(lambda: lock.acquire(timeout=0.5))
    assert await async_wait_until(lambda: len(queue_of(r, "t")) == 1)
    owner = queue_of(r, "t")[0]
    assert owner.startswith(async_client.client_id + ":")
    # alive for watchdog_timeout from joining (server time), whatever the lock's lease; the
    # score (Redisson's deadline) adds Redisson's allowance for its turn (first in line)
    joined = server_ms(r) + async_client.watchdog_timeout * 1000
    alive_ms = r.hget(alive_key("t"), owner)
    assert alive_ms is not None
    alive = int(alive_ms)
    assert joined - 1000 < alive <= joined
    assert deadlines(r, "t") == {owner: alive + WAIT}
    assert await job.result() is False
    assert queue_of(r, "t") == []
    assert deadlines(r, "t") == {}
    assert r.exists(alive_key("t")) == 0


async def test_eight_waiters_100ms_apart_acquire_in_order(async_client: tenure.AsyncClient) -> None:
    lock = async_client.fair_lock("eight")
    assert await lock.acquire(lease_time=1)
    order: list[int] = []
    times: list[float] = []

    async def waiter(i: int) -> None:
        assert await lock.acquire(lease_time=1)  # never released: each hold ends with its lease
        order.append(i)
        times.append(time.monotonic())

    start = time.monotonic()
    jobs = []
    for i in range(8):
        jobs.append(async_spawn(waiter, i))
        await async_sleep(0.1)  # the scenario: waiters arrive 100 ms apart
    for job in jobs:
        await job.join(timeout=30)
    assert order == list(range(8))
    # each takes over when the previous 1 s lease ends: no stall in between
    gaps = [b - a for a, b in zip([start, *times], times, strict=False)]
    assert all(0.5 < g < 2.0 for g in gaps), gaps


async def test_waiters_queued_one_by_one_acquire_in_arrival_order(
    async_client: tenure.AsyncClient, r: redis.Redis
) -> None:
    lock = async_client.fair_lock("afair")
    assert await lock.acquire(lease_time=0.5)
    order: list[int] = []

    async def waiter(i: int) -> None:
        assert await lock.acquire(lease_time=0.3)  # never released
        order.append(i)

    jobs = []
    for i in range(6):
        jobs.append(async_spawn(waiter, i))
        assert await async_wait_until(lambda n=i + 1: len(queue_of(r, "afair")) >= n)
    for job in jobs:
        await job.result(60)
    assert order == list(range(6))


async def test_clients_taking_turns_are_woken_by_the_release_not_the_turn_watcher(
    async_make_client: Callable[..., tenure.AsyncClient],
) -> None:
    """Two clients take one FairLock in turns. A client that asks again right after its
    release queues behind the woken head, on its channel still subscribed from its last
    wait; the next release must wake it at once, not the releasing client's turn watcher
    at its first look (FIRST_LOOK, the fallback for a lost wake-up)."""
    clients = [async_make_client(), async_make_client()]
    handoffs: list[float] = []
    released = [0.0]

    async def take_turns(client: tenure.AsyncClient) -> None:
        lock = client.fair_lock("turns")
        for _ in range(30):
            assert await lock.acquire(timeout=10)
            if released[0]:
                handoffs.append(time.monotonic() - released[0])
            # stamped before the release: the other client may take the lock before this
            # one runs again (with threads), and must never read a stamp of an older turn
            released[0] = time.monotonic()
            await lock.release()

    await async_gather(*(lambda c=c: take_turns(c) for c in clients))
    assert len(handoffs) == 59
    # Woken by the release: well under a millisecond here; a lost wake-up costs FIRST_LOOK.
    assert sorted(handoffs)[len(handoffs) // 2] < FIRST_LOOK / 2, sorted(handoffs)


async def test_a_new_lock_object_per_acquisition_costs_no_more_turn_looks(
    server: Server, async_make_client: Callable[..., tenure.AsyncClient]
) -> None:
    """The README's ``with client.fair_lock(name):`` makes a new lock object per
    acquisition. The turn watcher (its look FIRST_LOOK after a release that woke the head)
    is the client's for that lock, not the object's: a release moves the pending look as a
    reused object's does, so clients taking turns faster than FIRST_LOOK make (almost) no
    look either way. Per object, each release's own watcher looked: 1-2 looks per
    acquisition."""
    rounds = 30
    turn_sha = FairLockCore.turn_script.sha

    async def looks(new_object: bool) -> tuple[int, int]:
        clients = [async_make_client(), async_make_client()]
        monitor = Monitor(server)

        async def take_turns(client: tenure.AsyncClient) -> None:
            lock = client.fair_lock("objects")
            for _ in range(rounds):
                if new_object:
                    lock = client.fair_lock("objects")
                async with lock:
                    pass

        await async_gather(*(lambda c=c: take_turns(c) for c in clients))
        await async_sleep(4 * FIRST_LOOK)  # the last release's look, in both cases
        for client in clients:
            await client.close()  # no look after this
        commands = monitor.commands()
        scripts = [c for c in commands if c.startswith(("EVALSHA", "EVAL"))]
        return sum(turn_sha in c for c in scripts), len(scripts)

    reused, reused_scripts = await looks(new_object=False)
    new, new_scripts = await looks(new_object=True)
    acquisitions = 2 * rounds
    figures = f"turn looks {new} vs {reused}, scripts {new_scripts} vs {reused_scripts}"
    # Turns are ~1 ms apart here; a stall of FIRST_LOOK on a loaded machine costs a look
    # in either case, so the bound leaves room for a few.
    assert new <= reused + acquisitions // 10, figures


async def test_500_callers_increment_under_fair_lock(
    async_client: tenure.AsyncClient, r: redis.Redis
) -> None:
    lock = async_client.fair_lock("count")
    counter = [0]
    inside = [0]
    overlaps = [0]
    failures: list[BaseException] = []

    async def work() -> None:
        try:
            async with lock(timeout=90):
                inside[0] += 1
                if inside[0] != 1:
                    overlaps[0] += 1
                value = counter[0]
                await async_sleep(0)  # let others run: a missing exclusion would lose increments
                counter[0] = value + 1
                inside[0] -= 1
        except BaseException as error:
            failures.append(error)

    start = time.monotonic()
    await async_gather(*[work] * 500, timeout=100)
    elapsed = time.monotonic() - start
    assert failures == []
    assert counter[0] == 500
    assert overlaps[0] == 0
    assert elapsed < 90
    assert not await lock.locked()
    assert r.exists(keys.fair_queue_key("count")) == 0
    assert r.zcard(keys.fair_timeout_key("count")) == 0


async def test_waiters_leaving_move_the_others_up_as_redisson_does(
    async_client: tenure.AsyncClient, r: redis.Redis
) -> None:
    """Waiters that time out (ahead of another, or at the head) take 5 minutes (Redisson's
    threadWaitTime) off the score of each waiter behind them, as Redisson's give-up does,
    and change nothing else: a score is 5 minutes per waiter ahead, plus the alive-until
    time, which stays."""
    lock = async_client.fair_lock("drift")
    assert await lock.acquire(lease_time=10)
    early = [async_spawn(lambda: lock.acquire(timeout=0.6)) for _ in range(3)]
    assert await async_wait_until(lambda: len(queue_of(r, "drift")) == 3)
    last = async_spawn(lambda: lock.acquire(timeout=20, lease_time=5))
    assert await async_wait_until(lambda: len(queue_of(r, "drift")) == 4)
    last_owner = queue_of(r, "drift")[-1]
    before = deadlines(r, "drift")[last_owner]
    alive = r.hgetall(alive_key("drift"))
    assert before == int(alive[last_owner.encode()]) + 4 * WAIT  # its own place and 3 ahead
    for job in early:
        assert await job.result() is False
    assert queue_of(r, "drift") == [last_owner]
    assert deadlines(r, "drift") == {last_owner: before - 3 * WAIT}
    assert r.hgetall(alive_key("drift")) == {last_owner.encode(): alive[last_owner.encode()]}
    await lock.release()
    assert await last.result() is True


async def test_force_release_wakes_head(async_client: tenure.AsyncClient, r: redis.Redis) -> None:
    lock = async_client.fair_lock("force")
    assert await lock.acquire()  # watchdog lease: only a wake-up lets the waiter in soon
    job = async_spawn(async_stamped, lambda: lock.acquire(timeout=10, lease_time=5))
    assert await async_wait_until(lambda: len(queue_of(r, "force")) == 1)
    forced = time.monotonic()
    assert await lock.force_release() is True
    acquired, at = await job.result()
    assert acquired
    assert at - forced < 1.0
    assert await lock.force_release() is True
    assert await lock.force_release() is False
    with pytest.raises(tenure.LockLostError):
        await lock.release()  # the caller's watchdog hold was taken away


async def test_timed_out_waiter_leaves_queue_and_holder_reenters(
    async_client: tenure.AsyncClient, r: redis.Redis
) -> None:
    lock = async_client.fair_lock("acancel")
    assert await lock.acquire(lease_time=10)
    queue = keys.fair_queue_key("acancel")
    timed = async_spawn(lambda: lock.acquire(timeout=0.3))
    assert await async_wait_until(lambda: r.llen(queue) == 1)
    assert await timed.result() is False
    assert r.exists(queue, keys.fair_timeout_key("acancel")) == 0
    assert await lock.acquire(blocking=False)  # re-entry by the holder
    assert await lock.hold_count() == 2
    await lock.release()
    await lock.release()
    assert not await lock.locked()


async def test_bad_arguments_fail_before_io(async_client: tenure.AsyncClient) -> None:
    with pytest.raises(TypeError):
        async_client.fair_lock(3)  # type: ignore[arg-type]
    lock = async_client.fair_lock("args")
    with pytest.raises(ValueError, match="timeout"):
        await lock.acquire(timeout=-2)
    with pytest.raises(ValueError, match="lease_time"):
        await lock.acquire(lease_time=math.inf)


@pytest.mark.long  # a fault run: the server paused, 6 s a server
async def test_failed_give_up_is_retried_within_half_a_second_of_the_server_answering(
    own_server: Server,
) -> None:
    """Issue 23 item 5: a waiter whose wait ended while the server was paused (SIGSTOP)
    could not leave the queue (its give-up timed out: socket_timeout 0.5); the background
    retry must remove its entry within 0.5 s after the server answers again. It slept a
    back-off after each timed-out attempt (growing to 1 s), so a server that came back
    during that sleep kept the entry up to 1.5 s longer. The server here comes back 6.3 s
    after the wait began: on that code, 0.75 s before its next attempt (the wait ends at
    1 s, its unsubscribe and give-up time out at 1.5 and 2 s, then attempts of 0.5 s
    after sleeps of 0.05, 0.1, 0.2, 0.4, 0.8 and 1 s)."""
    client = tenure.AsyncClient(own_server.url, socket_timeout=0.5)
    holder = tenure.AsyncClient(own_server.url)
    r = own_server.client()
    queue = keys.fair_queue_key("paused")
    try:
        assert await holder.fair_lock("paused").acquire(lease_time=60)
        waiter = client.fair_lock("paused")
        started = time.monotonic()
        job = async_spawn(lambda: waiter.acquire(timeout=1.0))
        assert await async_wait_until(lambda: r.llen(queue) == 1)
        own_server.pause()
        outcome = await job.outcome(10)  # the wait ends at 1 s; its give-up times out
        assert isinstance(outcome, tenure.BackendError), outcome
        await async_sleep(started + 6.3 - time.monotonic())
        own_server.resume()
        answered = time.monotonic()
        assert await async_wait_until(lambda: r.llen(queue) == 0, timeout=5, poll=0.005)
        took = time.monotonic() - answered
        assert took < 0.5, f"the entry left {took:.3f} s after the server answered again"
        assert r.zcard(keys.fair_timeout_key("paused")) == 0
    finally:
        own_server.resume()
        await client.close()
        await holder.close()
        r.close()
