# GENERATED from tests/_async/test_election_loss.py by tools/unasync.py: edit that file, not this one.
"""Election: a leadership lost on the server while its client still records it, and
``leadership()`` blocks that share one leadership (nested, or entered by two tasks)."""

from __future__ import annotations

import asyncio
import logging

import pytest

import tenure
from support.twins import (
    Event,
    is_asyncio,
    sleep,
    spawn,
    wait_until,
)
from tenure.core.election import election_keys

LEADER, TERM, QUEUE, DEADLINES, CANDIDATES, LOG = election_keys("sched")


def test_campaign_after_a_server_side_loss_reports_it_and_takes_nothing(
    make_client, r
):
    # A's lease ends on the server before its watchdog's next renewal (a pause), B leads
    # term 2 and resigns, then A campaigns again ("ensure I lead"): term 1 was lost while
    # B led. The campaign reports it (lost, on_lost, the block cancelled) and raises
    # LockLostError, drawing no term over it; the next campaign is a new leadership.
    reported: list[object] = []
    a = make_client().election("sched", on_lost=reported.append)
    b = make_client().election("sched")
    entered, proceed = Event(), Event()
    reached: list[int] = []

    def lead() -> None:
        with a.leadership("a") as term:
            reached.append(term)
            entered.set()
            proceed.wait(10)
            reached.append(-term)  # asyncio: never (cancelled when the loss is reported)

    job = spawn(lead)
    try:
        assert entered.wait(10)
        r.pexpire(LEADER, 1)
        assert wait_until(lambda: not r.exists(LEADER))
        assert b.campaign("b", timeout=1) == 2
        b.resign()
        with pytest.raises(tenure.LockLostError, match="term 1 was lost"):
            a.campaign("a", timeout=1)
        assert a.lost
        assert a.valid_for() == 0.0
        with pytest.raises(tenure.LockLostError):
            a.checkpoint()
        assert not r.exists(LEADER)  # nothing drawn, nobody queued
        assert r.get(TERM) == b"2"
        assert r.llen(QUEUE) == 0
        assert wait_until(lambda: reported == [a], timeout=5)
    finally:
        proceed.set()
    outcome = job.outcome()
    assert isinstance(outcome, tenure.LockLostError), outcome
    if is_asyncio:
        assert reached == [1]
        assert isinstance(outcome.__cause__, asyncio.CancelledError)
    assert a.campaign("a", timeout=1) == 3  # a new leadership
    assert not a.lost
    a.checkpoint()
    a.resign()
    assert not r.exists(LEADER)
    assert reported == [a]


def test_campaign_again_while_still_leading_reports_nothing(client, r):
    reported: list[object] = []
    a = client.election("sched", on_lost=reported.append)
    assert a.campaign("a") == 1
    r.pexpire(LEADER, 5000)
    assert a.campaign("a", timeout=0) == 1  # the same leadership: lease re-applied
    assert r.pttl(LEADER) > 5000
    assert not a.lost
    a.resign()
    assert reported == []


def test_nested_leadership_resigns_at_the_outermost_exit(make_client, r):
    a = make_client().election("sched")
    b = make_client().election("sched")
    with a.leadership("a") as outer:
        with a.leadership("a") as inner:
            assert inner == outer == 1
        assert a.is_leader()  # the outer block still runs under it
        a.checkpoint()
        assert a.valid_for() > 0
        assert b.campaign("b", timeout=0) is None
    assert not r.exists(LEADER)
    assert b.campaign("b", timeout=0) == 2


def test_leadership_entered_by_two_tasks_ends_with_the_last(make_client, r):
    a = make_client().election("sched")
    b = make_client().election("sched")
    entered, leave = Event(), Event()

    def first() -> bool:
        with a.leadership("a") as term:
            assert term == 1
            entered.set()
            leave.wait(10)
            return a.is_leader()

    job = spawn(first)
    waiting = None
    try:
        assert entered.wait(10)
        with a.leadership("a") as term:  # the same candidate, another task
            assert term == 1
        assert a.is_leader()
        waiting = spawn(lambda: b.campaign("b", timeout=10))
        assert wait_until(lambda: r.llen(QUEUE) == 1)
        assert a.is_leader()  # B waits while the first block runs
    finally:
        leave.set()
    assert job.result() is True
    assert waiting.result() == 2  # handed over at the last exit


def test_nested_blocks_each_raise_a_loss_once(make_client, r):
    a = make_client(watchdog_timeout=0.6).election("sched")
    inner_left: list[BaseException] = []

    def lead() -> None:
        with a.leadership("a"):
            try:
                with a.leadership("a"):
                    r.delete(LEADER)
                    wait_until(lambda: a.lost, timeout=5)
                    if is_asyncio:  # cancelled at once; a thread's body runs on
                        sleep(5)
            except BaseException as error:
                inner_left.append(error)
                raise

    with pytest.raises(tenure.LockLostError):
        lead()
    assert len(inner_left) == 1
    with pytest.raises(tenure.NotOwnedError):  # the loss was raised, not kept for later
        a.resign()


def test_a_block_whose_leadership_was_lost_leaves_the_next_one_alone(make_client, r):
    # The watchdog reports term 1 lost; the candidate campaigns again (another task) and
    # leads term 2 while the term-1 block still runs: that block's exit raises the loss and
    # must not resign term 2.
    a = make_client(watchdog_timeout=0.6).election("sched")
    entered, proceed = Event(), Event()

    def lead() -> None:
        with a.leadership("a"):
            entered.set()
            proceed.wait(10)

    job = spawn(lead)
    try:
        assert entered.wait(10)
        r.delete(LEADER)
        assert wait_until(lambda: a.lost, timeout=5)
        assert a.campaign("a", timeout=1) == 2
    finally:
        proceed.set()
    assert isinstance(job.outcome(), tenure.LockLostError)
    assert r.hget(LEADER, "term") == b"2"
    assert a.is_leader()
    a.resign()


def test_a_block_entered_after_a_server_side_loss_ends_every_block(client, r):
    a = client.election("sched")
    refused: list[BaseException] = []

    def lead() -> None:
        with a.leadership("a") as term:
            assert term == 1
            r.pexpire(LEADER, 1)  # lost on the server; no renewal has seen it yet
            wait_until(lambda: not r.exists(LEADER))
            try:
                with a.leadership("a"):
                    pytest.fail("entered a leadership that was lost")
            except BaseException as error:
                refused.append(error)
                raise

    with pytest.raises(tenure.LockLostError):
        lead()
    # The campaign refused (a thread); in asyncio the loss it reported cancelled the task
    # first, and the outer block turned that into LockLostError.
    expected = asyncio.CancelledError if is_asyncio else tenure.LockLostError
    assert [type(e) for e in refused] == [expected]
    assert a.lost
    assert not r.exists(LEADER)
    assert r.get(TERM) == b"1"


def test_the_first_campaign_warns_once_when_the_server_persists_nothing(
    make_client, r, caplog, monkeypatch
):
    # Terms are fencing tokens: a restart of a server that persists nothing (the test
    # servers persist nothing) starts them over. One warning per client, as a FencedLock's.
    monkeypatch.delenv("TENURE_ACCEPT_NO_PERSISTENCE", raising=False)
    caplog.set_level(logging.WARNING, logger="tenure")
    c = make_client()
    election = c.election("sched")
    assert election.campaign("a") == 1
    election.resign()
    assert election.campaign("a") == 2
    assert c.election("other").campaign("b") == 1
    c.fenced_lock("ledger").acquire()
    warned = [rec.getMessage() for rec in caplog.records if "persists nothing" in rec.getMessage()]
    assert len(warned) == 1, warned
    assert warned[0].startswith("election 'sched': ")
    assert "its terms start over" in warned[0]
    monkeypatch.setenv("TENURE_ACCEPT_NO_PERSISTENCE", "1")  # acknowledged: DEBUG
    caplog.clear()
    assert make_client().election("sched").campaign("c", timeout=0) is None
    assert not [rec for rec in caplog.records if "persists nothing" in rec.getMessage()]


# An explicit resign() while leadership() blocks run under that leadership ends it for every
# block, as a loss does: a block of another task (or thread) raises LockLostError (in
# asyncio its body is cancelled at once); the block whose own caller resigned ends quietly.
# No block's exit resigns again or raises NotOwnedError for a leadership it saw resigned.


def test_a_resign_inside_the_block_ends_it_quietly(make_client, r):
    a = make_client().election("sched")
    b = make_client().election("sched")
    with a.leadership("a") as term:
        assert term == 1
        a.resign()
        assert not a.is_leader()
        with pytest.raises(tenure.NotOwnedError):  # it no longer leads
            a.checkpoint()
        assert a.valid_for() == 0.0
        assert b.campaign("b", timeout=1) == 2  # handed over at the resign
    assert r.hget(LEADER, "term") == b"2"  # the exit did not resign again
    assert not a.lost
    b.resign()


def test_a_resign_in_a_nested_block_ends_both_quietly(make_client, r):
    a = make_client().election("sched")
    with a.leadership("a"):
        with a.leadership("a"):
            a.resign()
        assert not a.is_leader()
    assert not r.exists(LEADER)
    with pytest.raises(tenure.NotOwnedError):
        a.resign()
    with a.leadership("a") as term:  # a new leadership, its blocks as before
        assert term == 2
    assert not r.exists(LEADER)


def test_a_resign_beside_a_block_ends_that_block(make_client, r):
    a = make_client().election("sched")
    entered, resigned = Event(), Event()
    went_on: list[bool] = []

    def lead() -> None:
        with a.leadership("a"):
            entered.set()
            assert resigned.wait(10)  # asyncio: cancelled at the resign
            went_on.append(True)

    job = spawn(lead)
    try:
        assert entered.wait(10)
        a.resign()  # another task (thread) of the same candidate
    finally:
        resigned.set()
    ended = job.outcome()
    assert isinstance(ended, tenure.LockLostError), ended
    assert "resigned" in str(ended)
    if is_asyncio:  # the body was cancelled; a thread's body ran on to its exit
        assert went_on == []
        assert isinstance(ended.__cause__, asyncio.CancelledError)
    else:
        assert went_on == [True]
    assert not r.exists(LEADER)  # resigned once: nothing more was asked of the server
    assert not a.lost
    with pytest.raises(tenure.NotOwnedError):
        a.resign()


def test_a_resign_from_one_block_ends_the_other_blocks(make_client, r):
    a = make_client().election("sched")
    entered, resigned = Event(), Event()

    def lead() -> None:
        with a.leadership("a", cancel_on_loss=False):
            entered.set()
            assert resigned.wait(10)

    job = spawn(lead)
    try:
        assert entered.wait(10)
        with a.leadership("a") as term:  # the same leadership, another task
            assert term == 1
            a.resign()
    finally:
        resigned.set()
    ended = job.outcome()  # cancel_on_loss=False: raised at its exit
    assert isinstance(ended, tenure.LockLostError), ended
    assert not r.exists(LEADER)
