# Lock semantics on real servers: exclusion, reentrancy, ownership, leases, waiting.
"""Lock semantics on real servers: exclusion, reentrancy, ownership, leases, waiting.

The caller is a task here and a thread in the generated sync twin (tests/_sync)."""

from __future__ import annotations

import math
import time
from functools import partial

import pytest

import tenure
from support.twins import (
    AsyncEvent,
    AsyncRedis,
    async_gather,
    async_sleep,
    async_spawn,
    async_wait_until,
)
from support.wire import shared_channels
from tenure import keys


async def test_wire_layout_is_redissons(async_client, r):
    lock = async_client.lock("orders:42")
    await lock.acquire()
    assert r.type("orders:42") == b"hash"
    fields = r.hgetall("orders:42")
    [(owner, count)] = fields.items()
    uuid, number = owner.decode().rsplit(":", 1)
    assert uuid == async_client.client_id
    assert len(uuid) == 36
    assert number.isdigit()
    assert count == b"1"
    assert 29_000 < r.pttl("orders:42") <= 30_000
    pubsub = r.pubsub()
    pubsub.subscribe("redisson_lock__channel:{orders:42}")
    assert pubsub.get_message(timeout=1)["type"] == "subscribe"
    await lock.release()
    message = pubsub.get_message(timeout=2)
    assert message["data"] == b"0"
    pubsub.close()


async def test_name_prefix_is_prepended_on_the_wire(async_make_client, r):
    lock = async_make_client(name_prefix="app1:").lock("job")
    await lock.acquire()
    assert lock.name == "job"
    assert r.exists("app1:job")
    assert not r.exists("job")
    await lock.release()


async def test_reentrancy_hold_counts(async_client):
    lock = async_client.lock("re")
    counts = [await lock.hold_count()]
    await lock.acquire()
    counts.append(await lock.hold_count())
    await lock.release()
    counts.append(await lock.hold_count())
    await lock.acquire()
    await lock.acquire()
    counts.append(await lock.hold_count())
    await lock.release()
    counts.append(await lock.hold_count())
    await lock.release()
    counts.append(await lock.hold_count())
    assert counts == [0, 1, 0, 2, 1, 0]
    assert not await lock.locked()


async def test_other_caller_cannot_release_and_does_not_own(async_client):
    lock = async_client.lock("mine")
    await lock.acquire()

    async def other() -> dict[str, object]:
        seen: dict[str, object] = {"owned": await lock.owned(), "locked": await lock.locked()}
        try:
            await lock.release()
        except tenure.NotOwnedError as error:
            seen["error"] = error
        return seen

    seen = await async_spawn(other).result()
    assert seen["owned"] is False
    assert seen["locked"] is True
    assert type(seen["error"]) is tenure.NotOwnedError
    assert await lock.owned()
    await lock.release()


async def test_reentrancy_and_other_caller_cannot_release(async_client):
    lock = async_client.lock("are")
    seen: list[object] = [await lock.hold_count()]
    await lock.acquire()
    await lock.acquire()
    seen.append(await lock.hold_count())

    async def other() -> object:
        try:
            await lock.release()
        except tenure.NotOwnedError as error:
            return (await lock.owned(), type(error))
        return "released"

    seen.append(await async_spawn(other).result())
    await lock.release()
    seen.append(await lock.hold_count())
    await lock.release()
    seen.append(await lock.locked())
    assert seen == [0, 2, (False, tenure.NotOwnedError), 1, False]


async def test_callers_sharing_one_lock_object_exclude_each_other(async_client):
    lock = async_client.lock("tasks")
    inside = 0
    overlaps = 0

    async def work() -> None:
        nonlocal inside, overlaps
        for _ in range(20):
            async with lock:
                inside += 1
                overlaps += inside > 1
                value = int(await async_client.redis.get("n") or 0)
                await async_sleep(0)
                await async_client.redis.set("n", value + 1)
                inside -= 1

    await async_gather(*[work] * 5)
    assert (int(await async_client.redis.get("n")), overlaps) == (100, 0)


async def test_release_without_hold_raises_not_owned(async_client):
    with pytest.raises(tenure.NotOwnedError) as info:
        await async_client.lock("never").release()
    assert not isinstance(info.value, tenure.LockLostError)


async def test_other_client_is_another_owner(async_make_client):
    a, b = async_make_client().lock("x"), async_make_client().lock("x")
    assert await a.acquire()
    assert not await b.acquire(blocking=False)
    assert not await b.owned()
    with pytest.raises(tenure.NotOwnedError):
        await b.release()
    await a.release()
    assert await b.acquire(timeout=0)
    await b.release()


async def test_acquire_timeout_returns_false_after_the_wait(async_make_client):
    await async_make_client().lock("held").acquire()
    lock = async_make_client().lock("held")
    start = time.monotonic()
    assert await lock.acquire(timeout=3) is False
    assert 2.9 <= time.monotonic() - start < 4.5
    start = time.monotonic()
    assert await lock.acquire(blocking=False) is False
    assert time.monotonic() - start < 1


async def test_with_timeout_raises_lock_timeout_and_never_enters(async_make_client):
    await async_make_client().lock("held").acquire()
    entered = False
    with pytest.raises(tenure.LockTimeout):
        async with async_make_client().lock("held")(timeout=0.2):
            entered = True
    assert not entered


async def test_lease_expiry_hands_over_and_old_release_raises_lost(async_make_client):
    first, second = async_make_client().lock("lease"), async_make_client().lock("lease")
    await first.acquire(lease_time=2)
    start = time.monotonic()
    assert await second.acquire(timeout=10)
    waited = time.monotonic() - start
    assert 1.8 <= waited < 2.5
    with pytest.raises(tenure.LockLostError):
        await first.release()
    assert first.lost
    with pytest.raises(tenure.NotOwnedError):  # reported once; now simply not held
        await first.release()
    assert await second.owned()
    await second.release()


async def test_timeout_and_short_lease_expiry(async_make_client):
    first, second = async_make_client().lock("alease"), async_make_client().lock("alease")
    await first.acquire(lease_time=1)
    start = time.monotonic()
    assert await second.acquire(timeout=0.3) is False
    assert 0.25 <= time.monotonic() - start < 1.0
    assert await second.acquire(timeout=5)
    assert time.monotonic() - start < 1.6
    with pytest.raises(tenure.LockLostError):
        await first.release()
    with pytest.raises(tenure.LockTimeout):
        async with first(timeout=0.1):
            pytest.fail("entered without the lock")
    await second.release()


async def test_remaining_lease_after_partial_release(async_client):
    lock = async_client.lock("lease3")
    assert await lock.remaining_lease() is None
    for _ in range(3):
        await lock.acquire(lease_time=10)
    await lock.release()
    await lock.release()
    assert 9 <= await lock.remaining_lease() <= 10
    assert await lock.hold_count() == 1
    await lock.release()
    assert await lock.remaining_lease() is None


async def test_remaining_lease_is_inf_without_expiry(async_client, r):
    r.hset("forever", "someone:1", 1)
    assert await async_client.lock("forever").remaining_lease() == math.inf


async def test_force_release_wakes_waiters(async_make_client, r):
    holder = async_make_client().lock("forced")
    await holder.acquire()
    waiter = async_make_client().lock("forced")
    done = AsyncEvent()

    async def wait() -> None:
        if await waiter.acquire(timeout=20):
            done.set()
            await waiter.release()

    job = async_spawn(wait)
    # the waiter subscribed: the wake-up must come from the message
    assert await async_wait_until(
        lambda: shared_channels(r) == [b"redisson_lock__channel:{forced}"]
    )
    assert await async_make_client().lock("forced").force_release() is True
    assert await done.wait(2), "force_release did not wake the waiter"
    await job.result()
    assert await async_make_client().lock("forced").force_release() is False


async def test_waiter_is_woken_by_release_not_by_lease(async_make_client, r):
    holder = async_make_client().lock("handoff")
    await holder.acquire()  # 30 s watchdog lease: only the unlock message can wake the waiter soon
    waiter = async_make_client().lock("handoff")
    got = AsyncEvent()

    async def wait() -> None:
        if await waiter.acquire(timeout=20):
            got.set()

    job = async_spawn(wait)
    assert await async_wait_until(
        lambda: shared_channels(r) == [b"redisson_lock__channel:{handoff}"]
    )
    await holder.release()
    assert await got.wait(2)
    await job.result()


async def first_after_release(r, holder, waiter, subscribers: int) -> str:
    """Who takes the lock first ("holder" or "waiter") when ``holder`` releases it once
    ``waiter`` (another client's) waits on it and the lock's channel has ``subscribers``,
    then at once asks for it again."""
    order: list[str] = []

    async def wait() -> None:
        assert await waiter.acquire(timeout=10)
        order.append("waiter")
        await waiter.release()

    job = async_spawn(wait)
    channel = keys.lock_channel(holder.name)
    assert await async_wait_until(lambda: r.pubsub_numsub(channel)[0][1] == subscribers)
    await holder.release()
    assert await holder.acquire(timeout=10)
    order.append("holder")
    await holder.release()
    await job.result()
    return order[0]


async def test_a_releaser_with_no_subscription_lets_the_waiter_it_woke_in_first(
    async_make_client, r
):
    """Issue 14: no barging. The release script counts the subscribers its unlock reached;
    the releaser takes away its own subscription only if it has one. Before, it guessed that
    one of them was its own: a holder that had never waited (no subscription) and woke one
    other client's waiter took the lock straight back, ahead of that waiter."""
    holder_client, waiter_client = async_make_client(), async_make_client()
    rounds, waiter_first = 10, 0
    for i in range(rounds):  # a new name each round: the holder has never waited on it
        name = f"polite{i}"
        holder, waiter = holder_client.lock(name), waiter_client.lock(name)
        await holder.acquire()
        waiter_first += await first_after_release(r, holder, waiter, subscribers=1) == "waiter"
    assert waiter_first >= rounds - 2, f"the waiter went first in {waiter_first} of {rounds}"


async def test_a_releaser_whose_subscription_lingers_lets_the_waiter_it_woke_in_first(
    async_make_client, r
):
    """Issue 14: no barging, when the releaser waited on the lock moments before (its
    subscription lingers, so its own unlock reaches its own socket). Its next acquire must
    not take that unlock for a wake-up: the waiters read the socket themselves, and nobody
    read it while the releaser held the lock, so the release reads what came at once. Before:
    the releaser's next wait read its own unlock and took the lock back ahead of the waiter."""
    first_client, holder_client, waiter_client = (async_make_client() for _ in range(3))
    rounds, waiter_first = 10, 0
    for i in range(rounds):
        name = f"lingering{i}"
        first, holder, waiter = (c.lock(name) for c in (first_client, holder_client, waiter_client))
        channel = keys.lock_channel(name)
        await first.acquire()

        async def free(first=first, channel=channel) -> None:
            assert await async_wait_until(lambda: r.pubsub_numsub(channel)[0][1] == 1)
            await first.force_release()

        freeing = async_spawn(free)
        assert await holder.acquire(timeout=10)  # it waited: its subscription lingers
        await freeing.result()
        waiter_first += await first_after_release(r, holder, waiter, subscribers=2) == "waiter"
    assert waiter_first >= rounds - 2, f"the waiter went first in {waiter_first} of {rounds}"


async def test_no_subscription_left_after_contention(async_make_client, r):
    client = async_make_client()
    names = [f"leak{i}" for i in range(5)]
    locks = [client.lock(n) for n in names]
    other = async_make_client()
    total = [0]

    async def work(i: int) -> None:
        own = other if i % 2 else client
        lock = own.lock(names[i % 5])
        for _ in range(100):
            async with lock:
                total[0] += 1

    await async_gather(*(partial(work, i) for i in range(10)))
    assert total[0] == 1000
    # UNSUBSCRIBE is sent without waiting for its reply
    await async_wait_until(lambda: not r.pubsub_channels(), 5, 0.05)
    assert r.pubsub_channels() == []
    assert not any([await lock.locked() for lock in locks])


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
async def test_bad_acquire_arguments_raise_before_io(kwargs, error):
    client = tenure.AsyncClient("redis://127.0.0.1:1/0")  # nothing listens: any I/O would fail
    with pytest.raises(error) as info:
        await client.lock("x").acquire(**kwargs)
    assert next(iter(kwargs)) in str(info.value)


@pytest.mark.parametrize("name", ["", 5, None, b"x"])
async def test_bad_names_raise(name):
    client = tenure.AsyncClient("redis://127.0.0.1:1/0")
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
async def test_bad_client_options_raise(kwargs):
    with pytest.raises((ValueError, TypeError), match=next(iter(kwargs))):
        tenure.AsyncClient("redis://127.0.0.1:1/0", **kwargs)


async def test_client_from_redis_instance(server, r):
    raw = AsyncRedis(port=server.port)
    async with tenure.AsyncClient(raw) as client, client.lock("shared") as lock:
        assert await lock.owned()
    assert await raw.ping()  # a passed-in client is not closed by tenure
    await raw.aclose()
    with pytest.raises(TypeError):
        tenure.AsyncClient(42)  # type: ignore[arg-type]
