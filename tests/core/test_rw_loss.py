"""A hold this owner had and lost always raises LockLostError at release (issue 23 item 11),
whichever of the keeper's report and the release comes first.

The keeper removes a hold it finds lost from the hold table (a renewal reply that says it is
gone, or its lease run out on the local clock) and reports it afterwards: after the rest of
the renewal pass (its other batches, one round trip each), or once the keeper's thread runs
again. A release that ran between the removal and the report found no hold and no reported
loss, and its script's nil became NotOwnedError (once in 64 injected holder pauses)."""

from __future__ import annotations

import time

import pytest

from tenure.core.context import Context
from tenure.core.lock import LockCore
from tenure.core.rwlock import ReadLockCore, WriteLockCore
from tenure.core.watchdog import renew
from tenure.errors import LockLostError, NotOwnedError

from .scripted import drive, fails

SIDES = [WriteLockCore, ReadLockCore, LockCore]


def take(lock: LockCore, owner: str) -> None:
    script = lock.acquire_script.name
    assert drive(lock.acquire(owner, True, None, None), [(script, None)]).result is True


def release_script(lock: LockCore) -> str:
    return lock.release_script.name


@pytest.mark.parametrize("side", SIDES)
def test_lost_by_a_renewal_not_yet_reported(ctx: Context, owner: str, side) -> None:
    lock = side(ctx, "rw")
    take(lock, owner)
    renewal = lock.renewal_script.name
    # The renewal pass finds the hold gone and removes it; its report is still to come.
    found = drive(renew(ctx), [(renewal, [0])]).result
    assert [hold.owner for hold in found] == [owner]
    run = fails(lock.release(owner), [])  # known lost: raised with no I/O
    assert isinstance(run.error, LockLostError), run.error
    found[0].sink.hold_lost(owner)  # the report comes now: it must not count twice
    with pytest.raises(NotOwnedError):
        drive(lock.release(owner), [(release_script(lock), None)])


@pytest.mark.parametrize("side", SIDES)
def test_lost_on_the_clock_not_yet_reported(ctx: Context, owner: str, side) -> None:
    lock = side(ctx, "rw")
    take(lock, owner)
    (hold,) = ctx.holds.expired(time.monotonic() + 3600)  # removed: its lease surely ended
    assert hold.owner == owner
    run = fails(lock.release(owner), [])  # known lost: raised with no I/O
    assert isinstance(run.error, LockLostError), run.error
    hold.sink.hold_lost(owner)
    with pytest.raises(NotOwnedError):
        drive(lock.release(owner), [(release_script(lock), None)])


@pytest.mark.parametrize("side", SIDES)
def test_reported_loss_raises_once_then_not_owned(ctx: Context, owner: str, side) -> None:
    lock = side(ctx, "rw")
    take(lock, owner)
    (hold,) = ctx.holds.expired(time.monotonic() + 3600)
    hold.sink.hold_lost(owner)  # the report came first: no I/O at release
    with pytest.raises(LockLostError):
        drive(lock.release(owner), [])
    with pytest.raises(NotOwnedError):
        drive(lock.release(owner), [(release_script(lock), None)])


@pytest.mark.parametrize("side", SIDES)
def test_never_held_is_not_owned(ctx: Context, owner: str, side) -> None:
    lock = side(ctx, "rw")
    with pytest.raises(NotOwnedError):
        drive(lock.release(owner), [(release_script(lock), None)])
