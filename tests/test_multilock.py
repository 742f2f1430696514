"""MultiLock: all members or none, across clients and servers."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import tenure
from servers import Server, valkey_binary


def test_empty_and_bad_members(client):
    with pytest.raises(ValueError):
        client.multi_lock()
    with pytest.raises(TypeError):
        client.multi_lock("not a lock")


def test_ten_threads_exactly_one_wins(make_client):
    a, b, c = make_client(), make_client(), make_client()
    members = (a.lock("m1"), b.lock("m2"), c.lock("m3"))
    start = threading.Barrier(10)
    results: list[bool] = []
    winners: list[tenure.MultiLock] = []
    mutex = threading.Lock()

    def worker() -> None:
        multi = a.multi_lock(*members)
        start.wait()
        ok = multi.acquire(timeout=0, lease_time=10)
        with mutex:
            results.append(ok)
            if ok:
                winners.append(multi)
                assert multi.owned()

    threads = [threading.Thread(target=worker) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 1
    assert all(m.locked() for m in members)
    # the losers left nothing: each member has exactly one owner field
    for m, owner in zip(members, (a, b, c), strict=True):
        assert owner.redis.hlen(m.name) == 1


def test_blocked_by_a_member_holder_until_it_lets_go(make_client, r):
    a, b = make_client(), make_client()
    l1, l2, l3 = a.lock("a"), b.lock("b"), a.lock("c")
    holding, let_go = threading.Event(), threading.Event()

    def holder() -> None:
        assert l2.acquire()
        holding.set()
        let_go.wait(10)
        l2.release()

    h = threading.Thread(target=holder)
    h.start()
    assert holding.wait(5)
    multi = a.multi_lock(l1, l2, l3)
    assert not multi.acquire(timeout=0.2, lease_time=10)
    assert not l1.locked() and not l3.locked()  # released after the failed round

    got = threading.Event()
    outcome: list[bool] = []

    def taker() -> None:
        outcome.append(multi.acquire(timeout=20))
        got.set()
        multi.release()

    t = threading.Thread(target=taker)
    t.start()
    assert not got.wait(0.3)  # still blocked while l2 is held
    let_go.set()
    assert got.wait(10)
    t.join()
    h.join()
    assert outcome == [True]
    assert not (l1.locked() or l2.locked() or l3.locked())


def test_lease_is_set_back_after_long_wait(client, r):
    multi = client.multi_lock(client.lock("x"), client.lock("y"))
    assert multi.acquire(timeout=5, lease_time=1)
    # members were taken with 2 x 5 s; once all held the requested lease is applied again
    assert 0 < r.pttl("x") <= 1000 and 0 < r.pttl("y") <= 1000
    multi.release()


def test_release_releases_every_member_and_aggregates_errors(client, r):
    l1, l2, l3 = client.lock("e1"), client.lock("e2"), client.lock("e3")
    multi = client.multi_lock(l1, l2, l3)
    with pytest.raises(tenure.NotOwnedError):
        multi.release()
    assert multi.acquire(lease_time=30)
    l1.force_release()
    l3.force_release()
    with pytest.raises(tenure.LockLostError) as info:
        multi.release()
    assert not l2.locked()  # released despite the failures around it
    assert any("another member failed" in note for note in info.value.__notes__)


def test_member_loss_reported_as_lost(make_client):
    c = make_client(watchdog_timeout=0.6)
    lost = threading.Event()
    multi = c.multi_lock(c.lock("w1"), c.lock("w2"), on_lost=lambda m: lost.set())
    assert multi.acquire()  # watchdog-renewed members
    assert not multi.lost
    c.lock("w2").force_release()
    assert lost.wait(5)
    assert multi.lost
    with pytest.raises(tenure.LockLostError):
        multi.release()


@pytest.fixture(scope="module")
def three() -> Iterator[list[Server]]:
    servers = [Server(valkey_binary()).start() for _ in range(3)]
    yield servers
    for s in servers:
        s.stop()


def test_members_on_three_servers(three):
    clients = [tenure.Client(s.url) for s in three]
    try:
        multi = clients[0].multi_lock(*(c.lock("res") for c in clients))
        with multi(timeout=5, lease_time=10):
            for s in three:
                with s.client() as raw:
                    assert raw.exists("res")
            assert multi.owned()
            other = clients[1].multi_lock(*(c.lock("res") for c in clients))
            result: list[bool] = []
            t = threading.Thread(target=lambda: result.append(other.acquire(timeout=0)))
            t.start()
            t.join()
            assert result == [False]
        for s in three:
            with s.client() as raw:
                assert not raw.exists("res")
    finally:
        for c in clients:
            c.close()


def test_async_multi_lock_exactly_one_and_blocking(server, r):
    import asyncio

    async def main() -> None:
        async with tenure.AsyncClient(server.url) as a, tenure.AsyncClient(server.url) as b:
            members = (a.lock("am1"), b.lock("am2"), a.lock("am3"))
            with pytest.raises(ValueError):
                a.multi_lock()

            async def one() -> bool:
                return await a.multi_lock(*members).acquire(timeout=0, lease_time=10)

            tasks = [asyncio.create_task(one()) for _ in range(10)]
            assert sum(await asyncio.gather(*tasks)) == 1
            for m in members:
                assert r.hlen(m.name) == 1
            await members[0].force_release()
            await members[1].force_release()
            await members[2].force_release()

            # a task holding one member blocks the multi-lock until it lets go
            holding, let_go = asyncio.Event(), asyncio.Event()

            async def holder() -> None:
                assert await members[1].acquire()
                holding.set()
                await let_go.wait()
                await members[1].release()

            h = asyncio.create_task(holder())
            await holding.wait()
            multi = a.multi_lock(*members)
            taker = asyncio.create_task(multi.acquire(timeout=20))
            done, _ = await asyncio.wait([taker], timeout=0.3)
            assert not done
            let_go.set()
            assert await asyncio.wait_for(taker, 10)
            await h
            assert await multi.owned() is False  # owned per task: this task is not the taker

    asyncio.run(asyncio.wait_for(main(), 60))
