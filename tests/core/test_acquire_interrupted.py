"""An acquire interrupted after its grant (asyncio cancellation, a raising signal handler):
the caller never learns it holds, so the grant must not stay behind, renewed by the
watchdog (docs/internals.md, "Cancellation and interruption")."""

from __future__ import annotations

import pytest

from tenure.core.context import Context
from tenure.core.effects import Background, Sleep, Subscribe, Unsubscribe
from tenure.core.lock import RECONCILE_RECHECK, LockCore
from tenure.core.rwlock import ReadLockCore, WriteLockCore
from tenure.errors import BackendError

from .scripted import drive


class Interrupt(Exception):
    """What a signal handler raised (or asyncio's CancelledError)."""


def cores(ctx: Context) -> list[tuple[LockCore, str]]:
    return [
        (LockCore(ctx, "l"), "lock_acquire"),
        (ReadLockCore(ctx, "rw"), "rw_read_acquire"),
        (WriteLockCore(ctx, "rw"), "rw_write_acquire"),
    ]


@pytest.mark.parametrize("which", [0, 1, 2])
def test_an_interrupt_after_the_grant_gives_the_hold_back(
    ctx: Context, owner: str, which: int
) -> None:
    lock, script = cores(ctx)[which]
    run = drive(
        lock.acquire(owner, True, None, None),
        [
            (script, 5000),
            (Subscribe, None),
            (script, None),  # granted on the retry...
            (Unsubscribe, Interrupt()),  # ...and interrupted before acquire returns
            (Unsubscribe, None),
        ],
        raises=True,
    )
    assert isinstance(run.error, Interrupt)
    # Not renewed: the table no longer has the hold; the server's is released in the
    # background (a second interrupt cannot stop it).
    assert ctx.holds.get(lock.key, lock.field(owner)) is None
    assert [e for e in run.extra if isinstance(e, Background)]
    assert (lock.key, lock.field(owner)) in ctx.reconciling


def test_a_reentrant_grant_interrupted_gives_back_only_that_hold(
    ctx: Context, owner: str
) -> None:
    lock = LockCore(ctx, "l")
    assert drive(lock.acquire(owner, True, None, None), [("lock_acquire", None)]).result is True
    run = drive(
        lock.acquire(owner, True, None, None),
        [
            ("lock_acquire", 5000),
            (Subscribe, None),
            ("lock_acquire", None),
            (Unsubscribe, Interrupt()),
            (Unsubscribe, None),
        ],
        raises=True,
    )
    assert isinstance(run.error, Interrupt)
    hold = ctx.holds.get("l", owner)
    assert hold is not None
    assert len(hold.leases) == 1
    assert ("l", owner) in ctx.reconciling  # the server's count is brought back to 1


def test_an_interrupt_before_any_grant_records_nothing(ctx: Context, owner: str) -> None:
    lock = LockCore(ctx, "l")
    run = drive(
        lock.acquire(owner, True, None, None),
        [("lock_acquire", 5000), (Subscribe, None), ("lock_acquire", 4000),
         (lambda e: True, Interrupt()), (Unsubscribe, None)],
        raises=True,
    )
    assert isinstance(run.error, Interrupt)
    assert ctx.holds.get("l", owner) is None
    assert not ctx.reconciling


def test_a_reconcile_never_pauses_past_the_give_up_bound(ctx: Context, owner: str) -> None:
    """While the server does not answer, the background reconcile of an interrupted grant
    retries with a growing pause; once the server answers again, the orphan hold goes
    within one pause and a round trip. So the pause stays at most 0.25 s, as a fair
    waiter's give-up (the bound for both: gone within 0.5 s of the server answering)."""
    lock = LockCore(ctx, "l")
    run = drive(
        lock.acquire(owner, True, None, None),
        [
            ("lock_acquire", 5000),
            (Subscribe, None),
            ("lock_acquire", None),
            (Unsubscribe, Interrupt()),
            (Unsubscribe, None),
        ],
        raises=True,
    )
    (reconcile,) = [e for e in run.extra if isinstance(e, Background)]
    down = [("lock_release+guard", BackendError("server paused"))] * 8
    up = [("lock_release+guard", 1), ("lock_release+guard", None), ("lock_release+guard", None)]
    undo = drive(reconcile.flow, [*down, *up])
    *pauses, recheck = [s.seconds for s in undo.of(Sleep)]  # one after each failure
    assert recheck == RECONCILE_RECHECK
    assert len(pauses) == 8
    assert pauses[:3] == [0.05, 0.1, 0.2]  # growing, as before
    assert max(pauses) <= 0.25, pauses
    assert (lock.key, lock.field(owner)) not in ctx.reconciling
