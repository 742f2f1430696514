# GENERATED from tests/_async/test_red_lock_quorum_lost.py by tools/unasync.py: edit that file, not this one.
"""A RedLock whose member holds fell below the quorum: ``extend()`` says so with
``LockLostError`` naming how many members were extended and the quorum, and
``checkpoint()`` stops the body once the acquisition's validity ran out (DESIGN §2.1 and
§2.2: ``extend`` raises as ``release`` does; ``checkpoint`` raises ``LockLostError`` when
``valid_for()`` is 0). The members are locks of one server under three names: the quorum
rule is the same as over independent servers."""

from __future__ import annotations

import pytest

import tenure
from support.twins import wait_until

NAMES = ("quorum-0", "quorum-1", "quorum-2")


@pytest.fixture
def red(client):
    lock = client.red_lock(*(client.lock(n) for n in NAMES), node_timeout=0.5)
    yield lock
    lock.close()


def test_extend_below_the_quorum_raises_lock_lost_naming_the_count(red, r):
    assert red.acquire(lease_time=10)
    assert wait_until(lambda: all(r.exists(n) for n in NAMES), timeout=2)
    r.delete(NAMES[1], NAMES[2])  # two of three holds gone (a failover, a force-release)
    with pytest.raises(
        tenure.LockLostError,
        match=r"only 1 of 3 members were extended, fewer than the quorum of 2",
    ):
        red.extend(5)
    assert not r.exists(NAMES[1])  # nothing taken back
    assert not r.exists(NAMES[2])


def test_extend_with_a_quorum_left_extends_the_members_still_held(red, r):
    assert red.acquire(lease_time=10)
    assert wait_until(lambda: all(r.exists(n) for n in NAMES), timeout=2)
    r.delete(NAMES[2])  # one of three gone: 2 of 3 is still a quorum
    red.extend(20)
    assert all(20_000 < r.pttl(n) <= 30_000 for n in NAMES[:2])
    assert not r.exists(NAMES[2])  # extend never takes a member anew
    red.release()
    assert not any(r.exists(n) for n in NAMES)


def test_checkpoint_raises_once_the_validity_ran_out(red):
    assert red.acquire(lease_time=0.3)
    red.checkpoint()  # valid: no error
    assert 0 < red.valid_for() < 0.3
    assert wait_until(lambda: red.valid_for() == 0.0, timeout=2)
    with pytest.raises(tenure.LockLostError, match="lost or ran out"):
        red.checkpoint()
