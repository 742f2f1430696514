"""FairLock's turn watcher is one per client and lock, whichever of the client's objects of
that lock plans the look (``with client.fair_lock(name):`` makes one object per
acquisition). The server-side counts: tests/_async/test_fair.py."""

from __future__ import annotations

import pytest

from tenure.core.context import Context
from tenure.core.effects import Sleep
from tenure.core.fair import FIRST_LOOK, NOTHING, TURN_STALE, FairLockCore
from tenure.core.holds import Identity

from .conftest import new_context
from .scripted import Clock, drive


def test_another_object_of_the_lock_moves_the_plan_of_the_clients_watcher(
    ctx: Context, clock: Clock
) -> None:
    (watch,) = drive(FairLockCore(ctx, "f").watch_turn(FIRST_LOOK), []).extra
    flow = watch.flow
    first = flow.send(None)
    assert isinstance(first, Sleep)
    assert first.seconds == pytest.approx(FIRST_LOOK)
    clock.advance(FIRST_LOOK / 2)
    # the next release, by a new object of the same lock: no second watcher...
    assert drive(FairLockCore(ctx, "f").watch_turn(FIRST_LOOK), []).extra == []
    # ...the running one, woken, sleeps until the new plan instead of looking
    clock.advance(FIRST_LOOK / 2)
    sleep = flow.send(None)
    assert isinstance(sleep, Sleep)
    assert sleep.seconds == pytest.approx(FIRST_LOOK / 2)
    # another lock, and another client, have watchers of their own
    assert len(drive(FairLockCore(ctx, "g").watch_turn(FIRST_LOOK), []).extra) == 1
    assert len(drive(FairLockCore(new_context(), "f").watch_turn(FIRST_LOOK), []).extra) == 1
    # once no one waits the watcher ends and the next plan, by any object, starts one again
    clock.advance(FIRST_LOOK)
    assert flow.send(None).script.name == "fair_turn"
    with pytest.raises(StopIteration):
        flow.send([NOTHING, 0])
    assert len(drive(FairLockCore(ctx, "f").watch_turn(FIRST_LOOK), []).extra) == 1


def test_a_watcher_that_never_ran_or_a_fork_does_not_stop_the_looks(
    ctx: Context, clock: Clock
) -> None:
    lock = FairLockCore(ctx, "f")
    (dropped,) = drive(lock.watch_turn(FIRST_LOOK), []).extra
    dropped.flow.close()  # never ran (its event loop closed before): it left its entry
    clock.advance(FIRST_LOOK)
    assert drive(lock.watch_turn(FIRST_LOOK), []).extra == []  # it might still be waking
    clock.advance(TURN_STALE + FIRST_LOOK)
    (watch,) = drive(lock.watch_turn(FIRST_LOOK), []).extra  # gone: another starts
    watch.flow.close()
    # in a forked child (a new identity) the parent's watchers do not run: its own start
    ctx.identity = Identity()
    assert len(drive(lock.watch_turn(FIRST_LOOK), []).extra) == 1
    assert len(drive(FairLockCore(ctx, "f").watch_turn(FIRST_LOOK), []).extra) == 0
