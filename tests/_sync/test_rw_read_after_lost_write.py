# GENERATED from tests/_async/test_rw_read_after_lost_write.py by tools/unasync.py: edit that file, not this one.
"""A read taken under the owner's own write hold, after that write hold was lost on the
server, reports the loss and takes nothing (found by the simulator: tests/test_sim.py,
``test_a_read_under_a_lost_write_hold_reports_the_loss``).

The owner of a ReadWriteLock's write side may take the read side too (Redisson's rule). Its
write hold goes on the server (``DEL`` stands in for a force-release, a failover or a FLUSH;
``PEXPIRE 1`` for a lease run out during a pause) while its client still counts it valid, up
to the next renewal. The owner then takes a read. The read acquire expected a re-entry only
when the client recorded read holds of the owner, so the read was granted afresh: the lock
in read mode, other readers let in beside a body that still believes it holds the write
side, and the loss not reported. Now the read acquire also expects the owner's write hold
when the client records one: with that hold gone the script grants nothing, the acquire
raises LockLostError and the write hold's loss is reported as the watchdog would (``lost``,
``on_lost``, the write body cancelled).

The watchdog lease is 30 s (a renewal every 10 s): the loss is found by the read, not by a
renewal. The caller is a task here and a thread in the generated sync twin (tests/_sync).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import redis

import tenure
from support.twins import wait_until
from tenure.core.rwlock import report_lost

LOSSES = ["del", "expire"]
AFTER = ["free", "written", "write-held", "read-held"]
"""What happened after the loss: nothing; another client took the write lock and released
it; another client holds the write lock; another client holds a read."""


def lose(r: redis.Redis, name: str, how: str) -> None:
    """The write hold goes on the server, unknown to its client."""
    if how == "del":
        r.delete(name)
    else:
        r.pexpire(name, 1)
        wait_until(lambda: not r.exists(name), timeout=2)


def reader_fields(r: redis.Redis, name: str) -> set[str]:
    """The reader fields of the lock hash (``mode`` and writer fields left out)."""
    names = {f.decode() if isinstance(f, bytes) else str(f) for f in r.hkeys(name)}
    return {f for f in names if f != "mode" and not f.endswith(":write")}


@pytest.fixture(autouse=True)
def _quiet_fencing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENURE_ACCEPT_NO_PERSISTENCE", "1")


def meanwhile(other, after: str) -> None:
    """What another client does with the lock after the hold was lost (``AFTER``)."""
    if after == "written":
        assert other.write_lock().acquire(blocking=False)
        other.write_lock().release()
    elif after == "write-held":
        assert other.write_lock().acquire(blocking=False)
    elif after == "read-held":
        assert other.read_lock().acquire(blocking=False)


@pytest.mark.parametrize("how", LOSSES)
@pytest.mark.parametrize("after", AFTER)
@pytest.mark.parametrize("blocking", [False, True])
def test_a_read_under_a_lost_write_hold_reports_it_and_takes_nothing(
    make_client, r, how, after, blocking
):
    a, b = make_client(), make_client()
    told: list[Any] = []
    name = f"read-after-lost-write-{how}-{after}-{blocking}"
    rw = a.read_write_lock(name, on_lost=told.append)
    wl, rl = rw.write_lock(), rw.read_lock()
    assert wl.acquire()
    lose(r, name, how)
    other = b.read_write_lock(name)
    meanwhile(other, after)
    before = set(r.hkeys(name))
    # Before: granted afresh (free, written, read-held: the lock in read mode) or refused
    # (write-held), the loss not reported: the owner still believed it held the write side.
    with pytest.raises(tenure.LockLostError, match="earlier hold on this lock was lost"):
        rl.acquire(blocking=blocking, timeout=5 if blocking else None)
    assert wl.lost
    wait_until(lambda: len(told) == 1, timeout=5)
    assert told == [wl]
    assert set(r.hkeys(name)) == before  # nothing was taken for A
    assert rl.valid_for() == 0.0  # nor recorded by its client
    assert wl.valid_for() == 0.0
    assert not rl.lost  # the read side held nothing to lose
    # The loss reported: the write hold's release says so, once.
    with pytest.raises(tenure.LockLostError):
        wl.release()
    with pytest.raises(tenure.NotOwnedError) as caught:
        wl.release()
    assert type(caught.value) is tenure.NotOwnedError
    if after in ("write-held", "read-held"):
        side = other.write_lock() if after == "write-held" else other.read_lock()
        assert side.owned()
        side.release()
    assert not r.exists(name)
    assert len(told) == 1


@pytest.mark.parametrize("how", LOSSES)
def test_no_reader_gets_in_beside_a_write_body_that_was_not_told(
    make_client, r, how
):
    """``with`` the read side nested in the write side: the inner block raises
    LockLostError instead of entering, and the outer block ends with it (its body, in
    asyncio, cancelled). Before: the inner block entered on a fresh read hold, and another
    client's reader got in while the outer body still believed it held the write side."""
    a, b = make_client(), make_client()
    told: list[Any] = []
    name = f"read-after-lost-write-nested-{how}"
    rw = a.read_write_lock(name, on_lost=told.append)
    wl, rl = rw.write_lock(), rw.read_lock()
    other = b.read_write_lock(name).read_lock()
    events: list[str] = []
    error: BaseException | None = None
    try:
        with wl:
            lose(r, name, how)
            with rl:
                events.append("inner entered")
                if other.acquire(blocking=False):  # before: True
                    events.append("another reader in beside the write body")
                    other.release()
            events.append("outer ran on")
    except BaseException as failure:
        error = failure
    assert isinstance(error, tenure.LockLostError), repr(error)
    assert events == []
    assert wl.lost
    wait_until(lambda: len(told) == 1, timeout=5)
    assert told == [wl]
    assert not r.exists(name)


def test_a_read_under_a_write_hold_still_held_is_granted(make_client, r):
    """The expectation costs nothing when the write hold is there: the read is granted on
    top of it, and the downgrade at the write release still leaves the lock read-held."""
    a = make_client()
    name = "read-under-held-write"
    rw = a.read_write_lock(name)
    wl, rl = rw.write_lock(), rw.read_lock()
    assert wl.acquire()
    assert rl.acquire(blocking=False)
    assert rl.acquire(blocking=False)  # a read re-entry under the write hold
    assert rl.hold_count() == 2
    wl.release()
    assert r.hget(name, "mode") == b"read"
    assert len(reader_fields(r, name)) == 1
    rl.release()
    rl.release()
    assert not r.exists(name)
    assert not wl.lost
    assert not rl.lost


@pytest.mark.parametrize("how", LOSSES)
def test_reads_taken_under_a_lost_write_hold_are_reported_with_it(
    make_client, r, how
):
    """The owner took a read under its write hold, then the hash went (both holds with it):
    the next read, a re-entry of both, reports both sides lost and takes nothing."""
    a = make_client()
    told: list[Any] = []
    name = f"reads-under-lost-write-{how}"
    rw = a.read_write_lock(name, on_lost=told.append)
    wl, rl = rw.write_lock(), rw.read_lock()
    assert wl.acquire()
    assert rl.acquire()
    lose(r, name, how)
    with pytest.raises(tenure.LockLostError):
        rl.acquire(blocking=False)
    assert wl.lost
    assert rl.lost
    wait_until(lambda: len(told) == 2, timeout=5)
    assert sorted(told, key=id) == sorted([wl, rl], key=id)
    assert not r.exists(name)
    assert rl.valid_for() == 0.0
    assert wl.valid_for() == 0.0



def test_a_write_hold_the_keeper_took_off_meanwhile_is_reported_before_the_raise(
    make_client, r
):
    """The keeper found the write hold gone (a renewal) while the read was in flight: the
    hold is off the table, its report to come after the keeper's pass. The read's 'lost'
    makes that report at once, and only once (`report_lost()`), before LockLostError."""
    a = make_client()
    told: list[Any] = []
    name = "read-after-lost-write-keeper"
    rw = a.read_write_lock(name, on_lost=told.append)
    wl = rw.write_lock()
    assert wl.acquire()
    core = wl.core
    hold = core.ctx.holds.get(core.key, core.field(wl.runner.owner()))
    assert hold is not None
    assert core.ctx.holds.expired(math.inf) == [hold]  # as the keeper removes a lost hold
    assert not wl.lost  # its report still to come
    report_lost(core.ctx, hold)
    assert wl.lost
    wait_until(lambda: len(told) == 1, timeout=5)
    assert told == [wl]
    hold.report_loss()  # the keeper's own report, after its pass: not a second one
    with pytest.raises(tenure.LockLostError):
        wl.release()
    assert told == [wl]
    r.delete(name)


# The other direction: the write side asked for by an owner whose client records read holds
# of it and no write hold. Redisson refuses that upgrade (LockUpgradeError here, at once); but
# with those read holds lost on the server the write was granted afresh (a free lock) or
# waited for (another holder), on top of reads the owner still believed it held: the loss
# told nobody until a renewal, or the read release after the write body.
@pytest.mark.parametrize("how", LOSSES)
@pytest.mark.parametrize("after", AFTER)
def test_a_write_asked_for_over_lost_read_holds_reports_them(
    make_client, r, how, after
):
    a, b = make_client(), make_client()
    told: list[Any] = []
    name = f"write-over-lost-reads-{how}-{after}"
    rw = a.read_write_lock(name, on_lost=told.append)
    wl, rl = rw.write_lock(), rw.read_lock()
    assert rl.acquire()
    lose(r, name, how)
    other = b.read_write_lock(name)
    meanwhile(other, after)
    before = set(r.hkeys(name))
    with pytest.raises(tenure.LockLostError, match="earlier hold on this lock was lost"):
        wl.acquire(blocking=False)
    assert rl.lost
    assert not wl.lost
    wait_until(lambda: len(told) == 1, timeout=5)
    assert told == [rl]
    assert set(r.hkeys(name)) == before  # nothing was taken for A
    assert rl.valid_for() == 0.0
    assert wl.valid_for() == 0.0
    with pytest.raises(tenure.LockLostError):
        rl.release()
    if after in ("write-held", "read-held"):
        side = other.write_lock() if after == "write-held" else other.read_lock()
        side.release()
    assert not r.exists(name)


def test_a_write_asked_for_over_read_holds_still_held_is_refused(make_client, r):
    """The expectation changes nothing while the read holds are there: LockUpgradeError at
    once, nothing taken, nothing reported lost."""
    a = make_client()
    name = "write-over-held-reads"
    rw = a.read_write_lock(name)
    wl, rl = rw.write_lock(), rw.read_lock()
    assert rl.acquire()
    with pytest.raises(tenure.LockUpgradeError):
        wl.acquire(blocking=False)
    with pytest.raises(tenure.LockUpgradeError):
        wl.acquire(timeout=5)
    assert r.hget(name, "mode") == b"read"
    rl.release()
    assert not r.exists(name)
    assert not wl.lost
    assert not rl.lost


@pytest.mark.parametrize("how", LOSSES)
def test_a_write_reentry_after_the_loss_reports_the_reads_under_it(
    make_client, r, how
):
    """The owner took a read under its write hold, then the hash went (both holds with it):
    a write re-entry reports both sides lost and takes nothing."""
    a = make_client()
    told: list[Any] = []
    name = f"write-reentry-reads-under-{how}"
    rw = a.read_write_lock(name, on_lost=told.append)
    wl, rl = rw.write_lock(), rw.read_lock()
    assert wl.acquire()
    assert rl.acquire()
    lose(r, name, how)
    with pytest.raises(tenure.LockLostError):
        wl.acquire(blocking=False)
    assert wl.lost
    assert rl.lost
    wait_until(lambda: len(told) == 2, timeout=5)
    assert not r.exists(name)
    assert rl.valid_for() == 0.0
    assert wl.valid_for() == 0.0
