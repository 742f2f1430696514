"""FairLock: a release that fails with a BackendError is finished in the background as a
Lock's is (tests/core/test_lock_release.py), and that finished release, when it freed the
lock and woke the queue's head, watches the head's turn as `FairLockCore.release()` does."""

from __future__ import annotations

from tenure.core.context import Context
from tenure.core.effects import Background
from tenure.core.fair import WOKE, FairLockCore
from tenure.errors import BackendError

from .scripted import drive, fails

FAIR, RELEASE, GUARDED_RELEASE = "fair_acquire", "fair_release", "fair_release+guard"


def test_a_failed_fair_release_finished_in_the_background_watches_the_heads_turn(
    ctx: Context, owner: str
) -> None:
    """The guarded release frees the lock and wakes the head (WOKE): the turn watcher starts
    (a head that missed its wake-up is woken again after `FIRST_LOOK`, not at the old lease
    end). The owner held the lock, so it is in no queue: no give-up is sent."""
    lock = FairLockCore(ctx, "f")
    assert drive(lock.acquire(owner, True, None, None), [(FAIR, None)]).result is True
    run = fails(lock.release(owner), [(RELEASE, BackendError("timeout"))])
    (background,) = [e for e in run.extra if isinstance(e, Background)]
    finish = drive(
        background.flow,
        [(GUARDED_RELEASE, WOKE), (GUARDED_RELEASE, None), (GUARDED_RELEASE, None)],
    )
    assert [c.script.name for c in finish.calls()] == [GUARDED_RELEASE] * 3  # no give-up
    watchers = [e for e in finish.extra if isinstance(e, Background)]
    assert len(watchers) == 1  # the turn watcher
    assert owner not in lock._woke
    assert not ctx.reconciling


def test_a_failed_fair_release_that_freed_nothing_watches_no_turn(
    ctx: Context, owner: str
) -> None:
    lock = FairLockCore(ctx, "f")
    assert drive(lock.acquire(owner, True, None, None), [(FAIR, None)]).result is True
    run = fails(lock.release(owner), [(RELEASE, BackendError("timeout"))])
    (background,) = [e for e in run.extra if isinstance(e, Background)]
    finish = drive(background.flow, [(GUARDED_RELEASE, None), (GUARDED_RELEASE, None)])
    assert [c.script.name for c in finish.calls()] == [GUARDED_RELEASE] * 2
    assert [e for e in finish.extra if isinstance(e, Background)] == []
