"""An acquire interrupted after its grant (asyncio cancellation, a raising signal handler):
the caller never learns it holds, so the grant must not stay behind, renewed by the
watchdog (docs/internals.md, "Cancellation and interruption")."""

from __future__ import annotations

import pytest

from tenure.core.context import Context
from tenure.core.effects import Background, Subscribe, Unsubscribe
from tenure.core.lock import LockCore
from tenure.core.rwlock import ReadLockCore, WriteLockCore

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
    assert hold is not None and len(hold.leases) == 1  # the first hold stays, renewed
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
    assert ctx.holds.get("l", owner) is None and not ctx.reconciling
