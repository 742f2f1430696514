# GENERATED from tests/_async/test_guarded.py by tools/unasync.py: edit that file, not this one.
"""``execute_if_held(*command)``: one command run atomically only while the caller holds
the lock on the server; LockLostError (and nothing run) otherwise."""

from __future__ import annotations

import threading
import time

import pytest

import tenure
from support.twins import is_asyncio

ROUNDS = 15


def test_a_guarded_write_runs_while_held(client, r):
    lock = client.lock("g")
    with pytest.raises(tenure.NotOwnedError):
        lock.execute_if_held("SET", "{g}:state", "early")
    assert not r.exists("{g}:state")
    with lock:
        assert lock.execute_if_held("SET", "{g}:state", "paid") in (True, b"OK", "OK")
        assert lock.execute_if_held("INCR", "{g}:n") == 1
        assert lock.execute_if_held("GET", "{g}:state") in (b"paid", "paid")
        assert lock.execute_if_held("GET", "{g}:missing") is None
        with pytest.raises(tenure.ServerError):  # the command's own refusal
            lock.execute_if_held("HSET", "{g}:state", "f", "v")
    assert r.get("{g}:state") == b"paid"


def test_a_guarded_write_after_the_hold_was_taken_runs_nothing(make_client, r):
    a, b = make_client(), make_client()
    mine, theirs = a.lock("g2"), b.lock("g2")
    mine.acquire()
    r.delete("g2")
    assert theirs.acquire(timeout=0)
    with pytest.raises(tenure.LockLostError):
        mine.execute_if_held("SET", "{g2}:state", "stale")
    assert not r.exists("{g2}:state")
    assert mine.lost
    with pytest.raises(tenure.LockLostError):  # reported: no I/O now
        mine.execute_if_held("SET", "{g2}:state", "stale")
    theirs.release()


def test_every_lock_kind_guards_its_writes(client, r):
    rw = client.read_write_lock("g3")
    kinds = [
        client.fair_lock("g4"), client.fenced_lock("g5"), rw.read_lock(),
        rw.write_lock(),
    ]
    for number, lock in enumerate(kinds):
        counter = "{" + lock.name + "}:" + str(number)
        with lock:
            assert lock.execute_if_held("INCR", counter) == 1
        with pytest.raises(tenure.NotOwnedError):
            lock.execute_if_held("INCR", counter)


def test_holders_paused_past_their_lease_write_nothing(make_client, server, r):
    """The fault test: a holder is paused (its whole event loop or thread blocked) past its
    lease while another client takes the lock and writes; the paused holder then writes
    through execute_if_held at once. In ROUNDS rounds, 0 of its late writes are accepted;
    every write of a live holder is."""
    paused = make_client().lock("fault")
    refused = on_server = 0
    for i in range(ROUNDS):
        assert paused.acquire(lease_time=0.2)
        assert paused.execute_if_held("RPUSH", "{fault}:log", f"A{i}")
        took, done = threading.Event(), threading.Event()

        def other(
            round_: int = i, took: threading.Event = took, done: threading.Event = done
        ) -> None:
            with tenure.Client(server.url) as client:
                lock = client.lock("fault")
                assert lock.acquire(timeout=5)
                lock.execute_if_held("RPUSH", "{fault}:log", f"B{round_}")
                took.set()
                done.wait(5)
                lock.release()

        thread = threading.Thread(target=other)
        thread.start()
        time.sleep(0.25)  # noqa: ASYNC251 -- the pause itself: nothing of this client runs
        assert took.wait(5)
        on_server += not paused.lost  # not yet seen here: the script's check refuses it
        try:
            paused.execute_if_held("RPUSH", "{fault}:log", f"A{i}-late")
        except tenure.LockLostError:
            refused += 1
        finally:
            done.set()
            thread.join(5)
    log = [x.decode() for x in r.lrange("{fault}:log", 0, -1)]
    late = [x for x in log if x.endswith("-late")]
    print(
        f"{ROUNDS} paused holders: {refused} late writes refused ({on_server} by the "
        f"server's check), {len(late)} accepted"
    )
    assert late == []
    assert refused == ROUNDS
    if is_asyncio:  # the whole loop was paused: nothing seen
        assert on_server == ROUNDS
    assert log == [w for i in range(ROUNDS) for w in (f"A{i}", f"B{i}")]
