# GENERATED from tests/_async/test_election_refusals.py by tools/unasync.py: edit that file, not this one.
"""A candidate that cannot lead is told so: ``leadership(timeout=...)`` raises LockTimeout
when not elected in time, as ``with lock(timeout=...)`` does, and leaves the queue; a
``proclaim()`` over a lost leadership raises LockLostError once (the loss also reported
through ``lost`` and ``on_lost``), NotOwnedError after, and changes nothing on the server
(DESIGN §2.2, Election)."""

from __future__ import annotations

import pytest

import tenure
from support.twins import wait_until
from tenure.core.election import election_keys

LEADER, TERM, QUEUE, DEADLINES, CANDIDATES, LOG = election_keys("refusals")


def test_leadership_not_won_in_time_raises_lock_timeout_and_leaves_the_queue(
    make_client, r
):
    leader = make_client().election("refusals")
    other = make_client().election("refusals")
    assert leader.campaign("a") == 1
    entered = False
    with pytest.raises(tenure.LockTimeout, match=r"not elected within 0\.2 s"):
        with other.leadership("b", timeout=0.2):
            entered = True
    assert not entered  # the body never runs without the leadership
    assert r.llen(QUEUE) == 0  # the candidate that gave up is not queued
    assert r.zcard(DEADLINES) == 0
    assert r.hget(LEADER, "value") == b"a"  # the leader is untouched
    assert not other.is_leader()
    leader.resign()


def test_proclaim_over_a_leadership_lost_on_the_server_raises_lock_lost(make_client, r):
    reported: list[object] = []
    election = make_client().election("refusals", on_lost=reported.append)
    assert election.campaign("a") == 1
    r.delete(LEADER)  # taken away before any renewal (default watchdog: 30 s) saw it
    with pytest.raises(tenure.LockLostError, match="the leadership was lost"):
        election.proclaim("a2")
    assert election.lost
    assert wait_until(lambda: reported == [election], timeout=5)
    assert not r.exists(LEADER)  # nothing proclaimed, nobody elected by the refusal
    with pytest.raises(tenure.NotOwnedError) as again:
        election.proclaim("a3")
    assert not isinstance(again.value, tenure.LockLostError)  # reported once


def test_proclaim_after_the_watchdog_found_the_loss_raises_lock_lost_once(
    make_client, r
):
    reported: list[object] = []
    client = make_client(watchdog_timeout=0.6)
    election = client.election("refusals", on_lost=reported.append)
    assert election.campaign("a") == 1
    r.delete(LEADER)
    assert wait_until(lambda: reported == [election], timeout=5)
    with pytest.raises(tenure.LockLostError, match="the leadership was lost"):
        election.proclaim("a2")
    with pytest.raises(tenure.NotOwnedError) as again:
        election.proclaim("a3")
    assert not isinstance(again.value, tenure.LockLostError)
    assert not r.exists(LEADER)
    assert r.get(TERM) == b"1"  # no term drawn by a refused proclaim
    assert reported == [election]  # reported once
