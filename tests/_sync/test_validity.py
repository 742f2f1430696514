# GENERATED from tests/_async/test_validity.py by tools/unasync.py: edit that file, not this one.
"""``valid_for()`` / ``checkpoint()`` (no I/O), ``in_doubt`` / ``on_doubt`` (jeopardy) and
``acquire(max_hold=...)`` (a hold cap), on real servers."""

from __future__ import annotations

import time

import pytest

import tenure
from support.servers import Server
from support.twins import is_asyncio, sleep, wait_until


def test_valid_for_and_checkpoint_when_nothing_is_held(client):
    lock = client.lock("v-none")
    assert lock.valid_for() == 0.0
    with pytest.raises(tenure.NotOwnedError) as caught:
        lock.checkpoint()
    assert not isinstance(caught.value, tenure.LockLostError)


def test_valid_for_counts_down_a_lease_and_checkpoint_stops_at_its_end(client, r):
    lock = client.lock("v-lease")
    before = time.monotonic()
    lock.acquire(lease_time=0.5)
    first = lock.valid_for()
    # lease - drift (0.01 x 0.5 + 2 ms), counted from just before the grant was sent
    assert 0.3 < first <= 0.5 - 0.007 - (time.monotonic() - before) + 0.001 + (
        time.monotonic() - before
    )
    lock.checkpoint()
    sleep(0.1)
    assert lock.valid_for() < first - 0.09
    assert wait_until(lambda: lock.valid_for() == 0.0, timeout=2)
    with pytest.raises(tenure.LockLostError):
        lock.checkpoint()  # run out on the local clock, whether or not reported yet
    assert not r.exists("v-lease") or r.pttl("v-lease") < 20  # the server agrees


def test_valid_for_follows_the_watchdog_renewals(make_client):
    lock = make_client(watchdog_timeout=0.9).lock("v-watchdog")
    lock.acquire()
    assert 0.7 < lock.valid_for() <= 0.9
    sleep(1.2)  # past the first lease: renewed meanwhile (every 0.3 s)
    assert 0.5 < lock.valid_for() <= 0.9
    lock.checkpoint()
    lock.release()
    assert lock.valid_for() == 0.0
    with pytest.raises(tenure.NotOwnedError):
        lock.checkpoint()


def test_a_hold_found_gone_has_no_validity(make_client, r):
    lock = make_client(watchdog_timeout=0.6).lock("v-gone")
    lock.acquire()
    r.delete("v-gone")
    assert wait_until(lambda: lock.lost, timeout=5)
    assert lock.valid_for() == 0.0
    with pytest.raises(tenure.LockLostError):
        lock.checkpoint()


def test_every_kind_has_validity(make_client, r):
    client = make_client()
    rw = client.read_write_lock("v-rw")
    kinds = [client.fair_lock("v-fair"), client.fenced_lock("v-fenced"), rw.read_lock()]
    for lock in kinds:
        assert lock.valid_for() == 0.0
        lock.acquire(lease_time=5)
        assert 4 < lock.valid_for() <= 5
        lock.checkpoint()
        lock.release()
    write = rw.write_lock()
    write.acquire(lease_time=5)
    assert 4 < write.valid_for() <= 5
    assert rw.read_lock().valid_for() == 0.0
    write.release()
    other = make_client()
    multi = client.multi_lock(client.lock("v-m1"), other.lock("v-m2"))
    multi.acquire(lease_time=5)
    assert 4 < multi.valid_for() <= 5
    multi.checkpoint()
    multi.release()
    assert multi.valid_for() == 0.0
    with pytest.raises(tenure.NotOwnedError):
        multi.checkpoint()


# ------------------------------------------------------------------ jeopardy
@pytest.fixture
def own_server(server):
    """A server of the session's kind that this test may pause."""
    s = Server(server.binary).start()
    yield s
    s.stop()


def test_in_doubt_while_renewal_fails_and_cleared_by_a_confirmed_renewal(own_server):
    doubts: list[object] = []
    losses: list[object] = []
    client = tenure.Client(own_server.url, watchdog_timeout=3.0, socket_timeout=0.25)
    try:
        lock = client.lock("v-doubt", on_doubt=doubts.append, on_lost=losses.append)
        lock.acquire()
        assert not lock.in_doubt
        for episode in (1, 2):
            own_server.pause()
            try:
                # the next pass (within 1 s) times out after 0.25 s: in doubt, still valid
                assert wait_until(lambda: lock.in_doubt, timeout=3)
                assert lock.valid_for() > 0
                assert not lock.lost
                lock.checkpoint()  # still valid: no error
                assert wait_until(lambda n=episode: len(doubts) == n, timeout=2)
            finally:
                own_server.resume()
            # the next confirmed renewal clears it
            assert wait_until(lambda: not lock.in_doubt, timeout=3)
            assert lock.valid_for() > 2
            assert not lock.lost
            assert losses == []
            assert doubts == [lock] * episode  # once per episode
        lock.release()
    finally:
        client.close()


def test_a_hung_renewal_is_doubt_on_the_clock_before_the_loss(own_server):
    """The renewal's reply never comes (the socket timeout, 5 s, is longer than the lease):
    the hold goes in doubt on the client's clock one period and a half after its last
    confirmation, and on_doubt is called before the loss."""
    seen: list[tuple[str, float]] = []
    client = tenure.Client(own_server.url, watchdog_timeout=3.0)
    try:
        lock = client.lock(
            "v-hung",
            on_doubt=lambda _: seen.append(("doubt", time.monotonic())),
            on_lost=lambda _: seen.append(("lost", time.monotonic())),
        )
        lock.acquire()
        own_server.pause()
        try:
            assert wait_until(lambda: len(seen) == 2, timeout=6)
        finally:
            own_server.resume()
        assert [what for what, _ in seen] == ["doubt", "lost"]
        assert seen[1][1] - seen[0][1] > 0.9  # doubt at ~1.5 s, lost at ~3 s
    finally:
        client.close()


def test_a_hold_paused_past_its_lease_goes_from_doubt_to_lost(own_server):
    client = tenure.Client(own_server.url, watchdog_timeout=1.2, socket_timeout=0.2)
    try:
        lock = client.lock("v-doubt-lost")
        lock.acquire()
        own_server.pause()
        try:
            assert wait_until(lambda: lock.in_doubt, timeout=3)
            assert wait_until(lambda: lock.lost, timeout=3)
            assert not lock.in_doubt
            assert lock.valid_for() == 0.0
        finally:
            own_server.resume()
    finally:
        client.close()


def test_on_doubt_must_be_callable(client):
    with pytest.raises(TypeError):
        client.lock("v-bad", on_doubt="no")


# ------------------------------------------------------------------ hold cap
def test_max_hold_stops_renewal_and_the_hold_ends(make_client, r):
    losses: list[object] = []
    lock = make_client(watchdog_timeout=0.6).lock("v-cap", on_lost=losses.append)
    start = time.monotonic()
    assert lock.acquire(max_hold=0.5)
    assert wait_until(lambda: not r.exists("v-cap"), timeout=5)
    gone = time.monotonic() - start
    # renewed until 0.5 s, then one lease (0.6 s) at most: gone within 1.1 s (+ slack)
    assert 0.5 < gone < 1.1 + 0.4, gone
    assert wait_until(lambda: lock.lost, timeout=2)
    assert wait_until(lambda: losses == [lock], timeout=2)
    with pytest.raises(tenure.LockLostError):
        lock.release()


def test_max_hold_in_the_context_and_its_checks(make_client, r):
    lock = make_client(watchdog_timeout=0.6).lock("v-cap-ctx")
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="max_hold"):
            lock.acquire(max_hold=bad)
    with pytest.raises(TypeError):
        lock.acquire(max_hold="1")
    assert not r.exists("v-cap-ctx")  # nothing sent
    with pytest.raises(tenure.LockLostError):
        with lock(max_hold=0.3):
            sleep(3 if is_asyncio else 1.2)
    fenced = make_client(watchdog_timeout=0.6).fenced_lock("v-cap-fenced")
    assert fenced.acquire_token(max_hold=0.3) is not None
    assert wait_until(lambda: fenced.lost, timeout=3)


def test_without_max_hold_the_watchdog_keeps_renewing(make_client, r):
    lock = make_client(watchdog_timeout=0.6).lock("v-nocap")
    lock.acquire()
    sleep(1.5)
    assert r.exists("v-nocap")
    assert not lock.lost
    lock.release()


def test_max_hold_caps_every_member_of_a_composite(make_client, r):
    a, b = (make_client(watchdog_timeout=0.6) for _ in range(2))
    multi = a.multi_lock(a.lock("v-cap-m1"), b.lock("v-cap-m2"))
    start = time.monotonic()
    assert multi.acquire(max_hold=0.3)
    assert wait_until(lambda: multi.lost, timeout=5)
    assert time.monotonic() - start < 0.3 + 0.6 + 0.5
    assert wait_until(lambda: not r.exists("v-cap-m1", "v-cap-m2"), timeout=2)
    with pytest.raises(tenure.LockLostError):
        multi.release()
    with pytest.raises(ValueError, match="max_hold"):
        multi.acquire(max_hold=0)


def test_a_member_in_doubt_puts_a_multi_lock_in_doubt(own_server, make_client):
    doubts: list[object] = []
    paused = tenure.Client(own_server.url, watchdog_timeout=3.0, socket_timeout=0.25)
    steady = make_client(watchdog_timeout=3.0)
    try:
        multi = steady.multi_lock(
            paused.lock("v-md1"), steady.lock("v-md2"), on_doubt=doubts.append
        )
        assert multi.acquire()
        assert not multi.in_doubt
        own_server.pause()
        try:
            assert wait_until(lambda: multi.in_doubt, timeout=3)
            assert wait_until(lambda: doubts == [multi], timeout=2)
            multi.checkpoint()  # in doubt, still valid
            assert multi.valid_for() > 0
        finally:
            own_server.resume()
        assert wait_until(lambda: not multi.in_doubt, timeout=3)
        assert doubts == [multi]
        assert not multi.lost
        multi.release()
    finally:
        paused.close()
