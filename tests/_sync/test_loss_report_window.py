# GENERATED from tests/_async/test_loss_report_window.py by tools/unasync.py: edit that file, not this one.
"""A loss report that comes after the owner took the lock (or won a term) again.

A renewal pass finds a hold gone on the server (a lease run out, a failover, a
force-release: here a DEL) and takes it off the client's hold table; the loss is reported
(the ``lost`` flag, ``on_lost``, the bodies under it cancelled) once the pass ends. A pass
of two batches reports after its second batch's reply: held back here (a hook on the
runner's ``perform``, real server all the same), that opens the gap between the finding and
the report. In that gap the same owner acquires the lock again, or the same candidate wins
a new term. The old hold's loss must still reach the old body and ``on_lost`` (no silent
loss), and must not land on the new hold: its body runs to its end, ``lost`` stays False.

The watchdog lease is 30 s (a pass every 10 s): the test drives the one pass it needs.
The owner is a task here and a thread in the generated sync twin (tests/_sync).
"""

from __future__ import annotations

import pytest

import tenure
from support.holding_back import hold_back_second_batch
from support.twins import Event, spawn
from tenure.core.election import election_keys

LEADER = election_keys("window-e")[0]


class Reports(list[object]):
    """An ``on_lost`` callback: the objects it was called with, and an event once it was."""

    def __init__(self) -> None:
        super().__init__()
        self.landed = Event()

    def __call__(self, lost: object) -> None:
        self.append(lost)
        self.landed.set()


def test_a_late_loss_report_leaves_the_owners_new_hold_alone(
    make_client, r, monkeypatch
):
    reported = Reports()

    client = make_client(watchdog_timeout=30)
    lock = client.lock("window", on_lost=reported)
    reader = client.read_write_lock("window-rw").read_lock()  # the pass's second batch
    reached, go = hold_back_second_batch(client._runner, monkeypatch)
    entered, gone, again = Event(), Event(), Event()
    seen: list[object] = []

    def old_hold() -> None:
        with lock:
            entered.set()
            assert gone.wait(10)

    def owner() -> None:
        with pytest.raises(tenure.LockLostError):  # the old body gets its loss
            old_hold()
        with lock:  # the same owner, a new hold, before the old one's report
            again.set()
            assert reported.landed.wait(10)  # the old hold's loss was reported meanwhile
            seen.extend([lock.lost, lock.valid_for() > 0])
            lock.checkpoint()
        seen.append(lock.lost)

    job = spawn(owner)
    try:
        assert entered.wait(10)
        assert reader.acquire(timeout=1)
        assert r.delete("window") == 1  # the hold goes on the server
        renewal = spawn(client._runner._renewal_pass)
        assert reached.wait(10)  # found gone and taken off; not reported yet
        gone.set()
        assert again.wait(10)
        go.set()
        renewal.result(10)
        job.result(10)
        assert seen == [False, True, False]  # the new hold was never marked lost
        assert reported == [lock]  # the old one was, once
        assert not r.exists("window")  # the new hold was released
    finally:
        go.set()
        gone.set()
        job.join(10)
        reader.release()


def test_a_late_loss_report_leaves_a_new_term_alone(make_client, r, monkeypatch):
    reported = Reports()

    client = make_client(watchdog_timeout=30)
    election = client.election("window-e", on_lost=reported)
    reader = client.read_write_lock("window-rw").read_lock()  # the pass's second batch
    reached, go = hold_back_second_batch(client._runner, monkeypatch)
    entered, leave, elected, finish = Event(), Event(), Event(), Event()
    seen: list[object] = []

    def old_term() -> int:
        with election.leadership("a") as term:
            entered.set()
            assert leave.wait(10)  # asyncio: cancelled when the loss is reported
        return term

    def new_term() -> int:
        with election.leadership("a") as term:  # the same candidate, a new term
            elected.set()
            assert finish.wait(10)
            seen.extend([election.lost, election.term, election.valid_for() > 0])
            election.checkpoint()
        return term

    first = spawn(old_term)
    second = None
    try:
        assert entered.wait(10)
        assert reader.acquire(timeout=1)
        assert r.delete(LEADER) == 1  # the leadership goes on the server
        renewal = spawn(client._runner._renewal_pass)
        assert reached.wait(10)  # found gone and taken off; not reported yet
        second = spawn(new_term)
        assert elected.wait(10)
        go.set()
        renewal.result(10)
        assert reported.landed.wait(10)
        leave.set()
        outcome = first.outcome(10)
        assert isinstance(outcome, tenure.LockLostError)  # the old block got its loss
        finish.set()
        term = second.result(10)
        assert term == 2
        assert seen == [False, 2, True]  # the new term was never marked lost
        assert reported == [election]  # the old one was, once
        assert not election.lost
        assert not r.exists(LEADER)  # the new term was resigned
    finally:
        go.set()
        leave.set()
        finish.set()
        first.join(10)
        if second is not None:
            second.join(10)
        reader.release()


def test_a_resign_before_the_loss_report_raises_the_loss(
    make_client, r, monkeypatch
):
    # As a lock's release in the gap raises LockLostError (not NotOwnedError): the caller
    # led, and its leadership is gone. The report that follows adds no second error.
    reported = Reports()

    client = make_client(watchdog_timeout=30)
    election = client.election("window-e", on_lost=reported)
    reader = client.read_write_lock("window-rw").read_lock()  # the pass's second batch
    reached, go = hold_back_second_batch(client._runner, monkeypatch)
    try:
        assert election.campaign("a", timeout=1) == 1
        assert reader.acquire(timeout=1)
        assert r.delete(LEADER) == 1  # the leadership goes on the server
        renewal = spawn(client._runner._renewal_pass)
        assert reached.wait(10)  # found gone and taken off; not reported yet
        with pytest.raises(tenure.LockLostError, match="lost before resign"):
            election.resign()
        go.set()
        renewal.result(10)
        assert reported.landed.wait(10)
        assert reported == [election]
        assert election.lost
        with pytest.raises(tenure.NotOwnedError):  # the loss was raised once
            election.resign()
    finally:
        go.set()
        reader.release()
