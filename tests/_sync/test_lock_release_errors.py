# GENERATED from tests/_async/test_lock_release_errors.py by tools/unasync.py: edit that file, not this one.
"""A release that fails with a BackendError (a timeout, a dropped connection) on a real server:
the caller gets the error, and the release is finished in the background once the server
answers, taking off the holds beyond those the caller still has and never one more
(docs/internals.md, "Cancellation and interruption").

Before, the hold had left the client's table (nobody renewed it) and every other waiter
waited out its whole lease (30 s). The caller is a task here and a thread in the generated
sync twin (tests/_sync)."""

from __future__ import annotations

import time

import pytest

import tenure
from support.pauses import Pause, sends_waiting, holder_url
from support.proxy import Proxy
from support.twins import spawn, wait_until
from support.wire import kill_the_waiting_script

KINDS = ["lock", "fair_lock"]


def make_lock(client, kind: str, name: str):
    if kind in ("read_lock", "write_lock"):
        return getattr(client.read_write_lock(name), kind)()
    return getattr(client, kind)(name)


def counts(r, name: str) -> list[int]:
    """The hold counts of the lock hash ``name`` (one field per owner)."""
    return [int(value) for value in r.hgetall(name).values()]


@pytest.fixture
def make_holder(server):
    """Factory of clients whose connections are named `support.pauses.HOLDER` (CLIENT LIST
    tells the holder's sends apart), closed at the end of the test."""
    made: list[tenure.Client] = []

    def make(**kwargs) -> tenure.Client:
        made.append(tenure.Client(holder_url(server.url), **kwargs))
        return made[-1]

    yield make
    for c in made:
        c.close()


def release_fails_in_a_pause(r, lock, seconds: float) -> float:
    """Pause the server (CLIENT PAUSE ALL) for ``seconds`` and release ``lock``, which must
    raise BackendError. Returns the pause's end (time.monotonic())."""
    r.execute_command("CLIENT", "PAUSE", round(seconds * 1000), "ALL")
    pause_end = time.monotonic() + seconds
    with pytest.raises(tenure.BackendError):
        lock.release()
    return pause_end


def releases_time_out_in_a_pause(
    r, port: int, lock, releases: int, all_seconds: float = 1.0
) -> float:
    """Pause the server (`support.pauses.Pause`, ALL for ``all_seconds``, then WRITE) and
    release ``lock`` ``releases`` times: each must raise BackendError (a timeout) while the
    server is still paused. Then two sends of the background's must be seen waiting on it
    (one waits; the next, sent once it timed out, is just sent) before the pause ends.
    Returns the moment the server answered again (time.monotonic())."""
    pause = Pause(r, port, "ALL", all_seconds=all_seconds)
    try:
        for _ in range(releases):
            with pytest.raises(tenure.BackendError):
                lock.release()
        assert not pause.all_over()  # every release failed while the server was paused
        seen = sends_waiting(r, pause)
        sends_waiting(r, pause, besides=seen)
    finally:
        unpaused = pause.end()
    return unpaused


def acquires_within_a_moment(waiter, r, name: str, since: float, kind: str):
    """``waiter`` acquires ``name`` less than 1 s after ``since`` (time.monotonic(), the
    moment the server answered again), not at the lease's end; then releases it.

    The server answers again at a moment the test knows: `Pause.end`, just after a send of
    the background's is seen waiting on it. A timed pause would end at the server's next
    cron tick, at a moment of its own that may find the background between two sends
    (tests/support/pauses.py): 0.618 s once at nice 5 beside 3 CPU hogs."""
    acquired = waiter.acquire(timeout=5)
    waited = time.monotonic() - since
    print(f"{kind}: acquired {waited:.3f} s after the server answered again")
    assert acquired, f"still held, pttl {r.pttl(name)} ms"
    assert waited < 1.0
    waiter.release()


@pytest.mark.parametrize("kind", [*KINDS, "fenced_lock", "write_lock", "read_lock"])
def test_a_release_that_timed_out_lets_the_lock_go_once_the_server_answers(
    make_holder, make_client, server, r, kind
):
    """The server paused longer than the holder's socket timeout: release raises
    BackendError, the background sends it again (a send that timed out is dropped with its
    connection, and sent anew), and another client acquires within a moment of the server
    answering, not at the lease's end (30 s)."""
    holder = make_holder(socket_timeout=0.3)
    other = make_client()
    lock = make_lock(holder, kind, "timed-out-release")
    # (Readers share: a writer waits for the read hold.)
    waiter = make_lock(other, "write_lock" if kind == "read_lock" else kind, "timed-out-release")
    assert lock.acquire()
    assert not waiter.acquire(blocking=False)  # its connection made
    unpaused = releases_time_out_in_a_pause(r, server.port, lock, 1)
    acquires_within_a_moment(waiter, r, "timed-out-release", unpaused, kind)
    assert not r.exists("timed-out-release")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("holds", [1, 2])
def test_a_release_whose_connection_dropped_takes_off_exactly_one_hold(
    make_holder, make_client, server, r, kind, holds
):
    """The release's script waits on a server paused for writes and its connection is
    killed (CLIENT KILL): the script never runs, release raises BackendError, and the
    background finishes it once the server answers. With 2 holds, one goes and the owner
    still holds the lock (count 1): never freed under it."""
    holder = make_holder()
    other = make_client()
    lock = make_lock(holder, kind, "dropped-release")
    waiter = make_lock(other, kind, "dropped-release")
    for _ in range(holds):
        assert lock.acquire()
    assert counts(r, "dropped-release") == [holds]
    pause = Pause(r, server.port, "WRITE")
    try:
        killer = spawn(kill_the_waiting_script, r)
        with pytest.raises(tenure.BackendError):
            lock.release()  # by the owner: this task (thread)
        assert killer.result(5)
        sends_waiting(r, pause)  # the background's, on a new connection
    finally:
        unpaused = pause.end()
    if holds == 1:
        acquires_within_a_moment(waiter, r, "dropped-release", unpaused, kind)
        return
    assert wait_until(lambda: counts(r, "dropped-release") == [1], 2.0), counts(
        r, "dropped-release"
    )
    print(f"{kind}: one hold taken off {time.monotonic() - unpaused:.3f} s after unpause")
    # The reconcile has settled (its recheck too): the owner's next call waits for it.
    assert lock.hold_count() == 1
    assert counts(r, "dropped-release") == [1]  # never one too many
    assert not waiter.acquire(blocking=False)
    lock.release()
    assert waiter.acquire(timeout=2)
    waiter.release()


def held_twice_first_release_failed(make_client, r, kind: str, name: str):
    """A lock ``name`` of ``kind`` held with count 2 by a client with a 0.3 s socket timeout,
    whose release then raised BackendError on a server paused for 0.8 s (longer: the paused
    script never runs). Returns the lock and the pause's end (time.monotonic())."""
    holder = make_client(socket_timeout=0.3)
    lock = make_lock(holder, kind, name)
    assert lock.acquire()
    assert lock.acquire()
    return lock, release_fails_in_a_pause(r, lock, 0.8)


@pytest.mark.parametrize("kind", KINDS)
def test_a_reentrant_release_that_timed_out_takes_off_one_hold(make_client, r, kind):
    """Count 2, the server paused past the socket timeout (the client drops the connection,
    the paused script never runs): once the pause ends, one hold goes and the owner still
    holds the lock with count 1, renewed."""
    lock, pause_end = held_twice_first_release_failed(
        make_client, r, kind, "timed-out-twice"
    )
    assert wait_until(lambda: counts(r, "timed-out-twice") == [1], 3.0), counts(
        r, "timed-out-twice"
    )
    print(f"{kind}: one hold taken off {time.monotonic() - pause_end:.3f} s after the pause")
    assert lock.hold_count() == 1
    assert lock.owned()
    assert counts(r, "timed-out-twice") == [1]  # never one too many
    lock.release()
    assert not r.exists("timed-out-twice")


@pytest.fixture
def proxy(server):
    p = Proxy(server.port)
    yield p
    p.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_reentrant_release_whose_reply_was_lost_takes_off_no_second_hold(proxy, r, kind):
    """Count 2, the release's script runs but its reply is held (a TCP proxy) past the
    socket timeout: BackendError, with the server already at the count the owner has (1).
    The background finds that out (`_reconcile_guard.lua`) and takes off nothing more: the
    lock stays the owner's."""
    holder = tenure.Client(proxy.url, socket_timeout=0.3)
    try:
        lock = make_lock(holder, kind, "lost-reply")
        assert lock.acquire()
        assert lock.acquire()
        lock.release()  # the release script now cached: no NOSCRIPT round trip
        assert lock.acquire()
        proxy.hold_replies()
        with pytest.raises(tenure.BackendError):
            lock.release()
        assert counts(r, "lost-reply") == [1]  # the script ran
        proxy.thaw()
        assert wait_until(lambda: not holder._runner.ctx.reconciling, 2.0)
        assert counts(r, "lost-reply") == [1]  # and nothing more was taken off
        assert lock.hold_count() == 1
        assert lock.owned()
        lock.release()
        assert not r.exists("lost-reply")
    finally:
        proxy.thaw()
        holder.close()


@pytest.mark.parametrize("kind", KINDS)
def test_the_owners_next_release_waits_for_the_failed_one_to_be_finished(
    make_client, r, kind
):
    """Count 2, the first release timed out on a paused server; the owner releases again at
    once: that release does not race the background finishing the first one. Its look at
    the server times out too (the caller's error within its socket timeout), it hands its
    hold over, and once the server answers both holds go: the lock free, no loss reported.
    (With the server back, the release waits for the background instead: the core tests.)"""
    lock, pause_end = held_twice_first_release_failed(
        make_client, r, kind, "released-twice"
    )
    start = time.monotonic()
    with pytest.raises(tenure.BackendError):
        lock.release()  # during the pause: its look times out
    assert time.monotonic() - start < 0.3 + 0.3
    assert wait_until(lambda: not r.exists("released-twice"), 3.0)
    print(f"{kind}: both holds gone {time.monotonic() - pause_end:.3f} s after the pause")
    assert not lock.lost


@pytest.mark.parametrize("kind", KINDS)
def test_a_release_that_waits_in_vain_for_the_failed_one_hands_its_hold_over(
    make_holder, make_client, server, r, kind
):
    """Count 2, both releases fail while the server stays paused (the second after waiting
    for the background finishing the first): once the server answers, both holds go and
    another client acquires within a moment."""
    holder = make_holder(socket_timeout=0.3)
    other = make_client()
    lock = make_lock(holder, kind, "handed-over")
    waiter = make_lock(other, kind, "handed-over")
    assert lock.acquire()
    assert lock.acquire()
    assert not waiter.acquire(blocking=False)  # its connection made
    unpaused = releases_time_out_in_a_pause(r, server.port, lock, 2, all_seconds=3.0)
    acquires_within_a_moment(waiter, r, "handed-over", unpaused, kind)
