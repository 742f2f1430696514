# MultiLock (asyncio source of tests/_sync/test_multilock.py).
"""MultiLock: all members or none, across clients and servers."""

from __future__ import annotations

import pytest

import tenure
from support.twins import AsyncBarrier, AsyncEvent, async_spawn
from tenure.errors import ClientClosedError


async def test_empty_and_bad_members(async_client):
    with pytest.raises(ValueError, match="at least one member"):
        async_client.multi_lock()
    with pytest.raises(TypeError):
        async_client.multi_lock("not a lock")


async def test_ten_callers_exactly_one_wins(async_make_client, r):
    a, b, c = async_make_client(), async_make_client(), async_make_client()
    members = (a.lock("m1"), b.lock("m2"), c.lock("m3"))
    start = AsyncBarrier(10)
    results: list[bool] = []
    winners: list[tenure.AsyncMultiLock] = []

    async def worker() -> None:
        multi = a.multi_lock(*members)
        await start.wait()
        ok = await multi.acquire(timeout=0, lease_time=10)
        results.append(ok)
        if ok:
            winners.append(multi)
            assert await multi.owned()

    for job in [async_spawn(worker) for _ in range(10)]:
        await job.result()
    assert results.count(True) == 1
    assert all([await m.locked() for m in members])
    # the losers left nothing: each member has exactly one owner field
    for m in members:
        assert r.hlen(m.name) == 1


async def test_blocked_by_a_member_holder_until_it_lets_go(async_make_client, r):
    a, b = async_make_client(), async_make_client()
    l1, l2, l3 = a.lock("a"), b.lock("b"), a.lock("c")
    holding, let_go = AsyncEvent(), AsyncEvent()

    async def holder() -> None:
        assert await l2.acquire()
        holding.set()
        await let_go.wait(10)
        await l2.release()

    h = async_spawn(holder)
    assert await holding.wait(5)
    multi = a.multi_lock(l1, l2, l3)
    assert not await multi.acquire(timeout=0.2, lease_time=10)
    assert not await l1.locked()
    assert not await l3.locked()

    got = AsyncEvent()
    outcome: list[bool] = []

    async def taker() -> None:
        outcome.append(await multi.acquire(timeout=20))
        got.set()
        assert await multi.owned()
        await multi.release()

    t = async_spawn(taker)
    assert not await got.wait(0.3)  # still blocked while l2 is held
    let_go.set()
    assert await got.wait(10)
    await t.result()
    await h.result()
    assert outcome == [True]
    assert not (await l1.locked())
    assert not (await l2.locked())
    assert not (await l3.locked())


async def test_multi_lock_owned_per_caller(async_make_client, r):
    a, b = async_make_client(), async_make_client()
    members = (a.lock("am1"), b.lock("am2"), a.lock("am3"))
    holding, let_go = AsyncEvent(), AsyncEvent()

    async def holder() -> None:
        assert await members[1].acquire()
        holding.set()
        await let_go.wait()
        await members[1].release()

    h = async_spawn(holder)
    assert await holding.wait(10)
    multi = a.multi_lock(*members)
    taker = async_spawn(lambda: multi.acquire(timeout=20))
    assert not await taker.join(0.3)
    let_go.set()
    assert await taker.result(10)
    await h.result()
    assert await multi.owned() is False  # owned per caller: this one is not the taker


async def test_lease_is_set_back_after_long_wait(async_client, r):
    multi = async_client.multi_lock(async_client.lock("x"), async_client.lock("y"))
    assert await multi.acquire(timeout=5, lease_time=1)
    # members were taken with 2 x 5 s; once all held the requested lease is applied again
    assert 0 < r.pttl("x") <= 1000
    assert 0 < r.pttl("y") <= 1000
    await multi.release()


async def test_release_releases_every_member_and_aggregates_errors(async_client, r):
    l1, l2, l3 = async_client.lock("e1"), async_client.lock("e2"), async_client.lock("e3")
    multi = async_client.multi_lock(l1, l2, l3)
    with pytest.raises(tenure.NotOwnedError):
        await multi.release()
    assert await multi.acquire(lease_time=30)
    await l1.force_release()
    await l3.force_release()
    with pytest.raises(tenure.LockLostError) as info:
        await multi.release()
    assert not await l2.locked()  # released despite the failures around it
    assert any("another member failed" in note for note in info.value.__notes__)


async def test_member_loss_reported_as_lost(async_make_client):
    c = async_make_client(watchdog_timeout=0.6)
    lost = AsyncEvent()
    multi = c.multi_lock(c.lock("w1"), c.lock("w2"), on_lost=lambda m: lost.set())
    assert await multi.acquire()  # watchdog-renewed members
    assert not multi.lost
    await c.lock("w2").force_release()
    assert await lost.wait(5)
    assert multi.lost
    with pytest.raises(tenure.LockLostError):
        await multi.release()


async def test_members_on_three_servers(three):
    clients = [tenure.AsyncClient(s.url) for s in three]
    try:
        multi = clients[0].multi_lock(*(c.lock("res") for c in clients))
        async with multi(timeout=5, lease_time=10):
            for s in three:
                with s.client() as raw:
                    assert raw.exists("res")
            assert await multi.owned()
            other = clients[1].multi_lock(*(c.lock("res") for c in clients))
            assert await async_spawn(lambda: other.acquire(timeout=0)).result() is False
        for s in three:
            with s.client() as raw:
                assert not raw.exists("res")
    finally:
        for c in clients:
            await c.close()


async def test_a_closed_members_client_is_refused_and_opens_no_connection(async_make_client, r):
    """A MultiLock whose member's client was closed: its release releases the live
    members and raises ClientClosedError for the closed one (its hold expires, as a plain
    lock's of a closed client does), without connecting again (before: the round sent
    the member's script on the closed client's pool, which opened a new connection that
    stayed open after both clients closed)."""
    closed, live = async_make_client(), async_make_client()
    both = closed.multi_lock(closed.lock("closed-member"), live.lock("live-member"))
    assert await both.acquire()
    await closed.close()
    connected = len(r.client_list())
    with pytest.raises(ClientClosedError):
        await both.release()
    assert r.exists("closed-member") == 1, "the closed client sent its member's release"
    assert r.exists("live-member") == 0, "the live member is still held"
    assert len(r.client_list()) <= connected, "the closed client connected again"
