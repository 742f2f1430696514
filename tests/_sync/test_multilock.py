# GENERATED from tests/_async/test_multilock.py by tools/unasync.py: edit that file, not this one.
"""MultiLock: all members or none, across clients and servers."""

from __future__ import annotations

import pytest

import tenure
from support.twins import Barrier, Event, spawn
from tenure.errors import ClientClosedError


def test_empty_and_bad_members(client):
    with pytest.raises(ValueError, match="at least one member"):
        client.multi_lock()
    with pytest.raises(TypeError):
        client.multi_lock("not a lock")


def test_ten_callers_exactly_one_wins(make_client, r):
    a, b, c = make_client(), make_client(), make_client()
    members = (a.lock("m1"), b.lock("m2"), c.lock("m3"))
    start = Barrier(10)
    results: list[bool] = []
    winners: list[tenure.MultiLock] = []

    def worker() -> None:
        multi = a.multi_lock(*members)
        start.wait()
        ok = multi.acquire(timeout=0, lease_time=10)
        results.append(ok)
        if ok:
            winners.append(multi)
            assert multi.owned()

    for job in [spawn(worker) for _ in range(10)]:
        job.result()
    assert results.count(True) == 1
    assert all([m.locked() for m in members])
    # the losers left nothing: each member has exactly one owner field
    for m in members:
        assert r.hlen(m.name) == 1


def test_blocked_by_a_member_holder_until_it_lets_go(make_client, r):
    a, b = make_client(), make_client()
    l1, l2, l3 = a.lock("a"), b.lock("b"), a.lock("c")
    holding, let_go = Event(), Event()

    def holder() -> None:
        assert l2.acquire()
        holding.set()
        let_go.wait(10)
        l2.release()

    h = spawn(holder)
    assert holding.wait(5)
    multi = a.multi_lock(l1, l2, l3)
    assert not multi.acquire(timeout=0.2, lease_time=10)
    assert not l1.locked()
    assert not l3.locked()

    got = Event()
    outcome: list[bool] = []

    def taker() -> None:
        outcome.append(multi.acquire(timeout=20))
        got.set()
        assert multi.owned()
        multi.release()

    t = spawn(taker)
    assert not got.wait(0.3)  # still blocked while l2 is held
    let_go.set()
    assert got.wait(10)
    t.result()
    h.result()
    assert outcome == [True]
    assert not (l1.locked())
    assert not (l2.locked())
    assert not (l3.locked())


def test_multi_lock_owned_per_caller(make_client, r):
    a, b = make_client(), make_client()
    members = (a.lock("am1"), b.lock("am2"), a.lock("am3"))
    holding, let_go = Event(), Event()

    def holder() -> None:
        assert members[1].acquire()
        holding.set()
        let_go.wait()
        members[1].release()

    h = spawn(holder)
    assert holding.wait(10)
    multi = a.multi_lock(*members)
    taker = spawn(lambda: multi.acquire(timeout=20))
    assert not taker.join(0.3)
    let_go.set()
    assert taker.result(10)
    h.result()
    assert multi.owned() is False  # owned per caller: this one is not the taker


def test_lease_is_set_back_after_long_wait(client, r):
    multi = client.multi_lock(client.lock("x"), client.lock("y"))
    assert multi.acquire(timeout=5, lease_time=1)
    # members were taken with 2 x 5 s; once all held the requested lease is applied again
    assert 0 < r.pttl("x") <= 1000
    assert 0 < r.pttl("y") <= 1000
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
    lost = Event()
    multi = c.multi_lock(c.lock("w1"), c.lock("w2"), on_lost=lambda m: lost.set())
    assert multi.acquire()  # watchdog-renewed members
    assert not multi.lost
    c.lock("w2").force_release()
    assert lost.wait(5)
    assert multi.lost
    with pytest.raises(tenure.LockLostError):
        multi.release()


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
            assert spawn(lambda: other.acquire(timeout=0)).result() is False
        for s in three:
            with s.client() as raw:
                assert not raw.exists("res")
    finally:
        for c in clients:
            c.close()


def test_a_closed_members_client_is_refused_and_opens_no_connection(make_client, r):
    """A MultiLock whose member's client was closed: its release releases the live
    members and raises ClientClosedError for the closed one (its hold expires, as a plain
    lock's of a closed client does), without connecting again (before: the round sent
    the member's script on the closed client's pool, which opened a new connection that
    stayed open after both clients closed)."""
    closed, live = make_client(), make_client()
    both = closed.multi_lock(closed.lock("closed-member"), live.lock("live-member"))
    assert both.acquire()
    closed.close()
    connected = len(r.client_list())
    with pytest.raises(ClientClosedError):
        both.release()
    assert r.exists("closed-member") == 1, "the closed client sent its member's release"
    assert r.exists("live-member") == 0, "the live member is still held"
    assert len(r.client_list()) <= connected, "the closed client connected again"
